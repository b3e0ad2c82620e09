"""Whole reassignments through kafka_reassign.run.reassign against the simulator over TCP (no Airflow)."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.errors import PlanValidationError, PreflightError
from kafka_reassign.execution.executor import run_execution
from kafka_reassign.execution.ownership import run_submitted
from kafka_reassign.run.cancel import cancel_in_flight
from kafka_reassign.run.prepare import prepare
from kafka_reassign.run.reassign import RunFailed, executor_for, run_reassignment
from kafka_reassign.throttle.apply import apply_throttle
from kafka_reassign.throttle.restore import restore_throttle
from kafka_reassign.throttle.record import FileRecordStore, submitted_targets
from kafka_reassign.throttle.specs import (FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS,
                                     ConfigChange)

FAST = {"poll_interval_seconds": 0.05, "stall_window_seconds": 10, "batch_timeout_minutes": 1}


def configs(cluster: Any) -> dict[str, dict[str, str]]:
    snap = cluster.snapshot()
    out = {f"broker {b['id']}": dict(cluster.broker_configs(b["id"])) for b in snap["brokers"]}
    out.update({f"topic {t['name']}": dict(cluster.topic_configs(t["name"])) for t in snap["topics"]})
    return out


def placement(cluster: Any, topic: str, n: int) -> dict[int, list[int]]:
    return {p: cluster.partition_state(topic, p)["replicas"] for p in range(n)}


class IsrSampler:
    """Samples every partition's ISR in a background thread; records min ISR violations."""

    def __init__(self, cluster: Any, topic: str, n: int, min_isr: int) -> None:
        self.cluster, self.topic, self.n, self.min_isr = cluster, topic, n, min_isr
        self.violations: list[tuple[int, list[int]]] = []
        self.samples = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in range(self.n):
                isr = self.cluster.partition_state(self.topic, p)["isr"]
                if len(isr) < self.min_isr:
                    self.violations.append((p, isr))
            self.samples += 1
            time.sleep(0.005)

    def __enter__(self) -> "IsrSampler":
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()


@pytest.fixture
def env(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict], tmp_path: Path):
    def make(time_scale: float = 20.0, **topics_override: Any):
        topics = topics_override or {
            "orders": {"partitions": 6, "rf": 3, "size_bytes": 20_000_000, "configs": {"min.insync.replicas": "2"}},
            "clicks": {"partitions": 2, "rf": 2, "size_bytes": 2_000_000}}
        cluster = sim_cluster(snapshot_factory(brokers=6, racks=3, topics=topics), time_scale=time_scale)
        admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)
        made.append(admin)
        return cluster, admin, FileRecordStore(tmp_path / "records")
    made: list[KafkaAdmin] = []
    yield make
    for a in made:
        a.close()


TARGET = {0: [4, 5, 6], 1: [5, 6, 1], 2: [6, 1, 2], 3: [1, 5, 6], 4: [5, 6, 4], 5: [6, 4, 5]}


def plan_for(targets: dict[int, list[int]], topic: str = "orders") -> dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r} for p, r in targets.items()]}


def test_full_execute_restores_operator_throttle(env):
    cluster, admin, store = env()
    # The operator's own throttle, set before the run: must be exactly the same afterwards.
    admin.alter_configs([ConfigChange("broker", "4", LEADER_RATE, None, "30000000"),
                         ConfigChange("broker", "1", FOLLOWER_RATE, None, "1000000"),
                         ConfigChange("topic", "orders", LEADER_REPLICAS, None, "5:9"),
                         ConfigChange("topic", "clicks", FOLLOWER_REPLICAS, None, "*")])
    before = configs(cluster)
    params = {"throttle_bytes_per_sec": 10_000_000, "max_partition_movements": 3, "max_movements_per_broker": 2,
              "max_leader_movements": 2, **FAST}
    events: list[str] = []
    with IsrSampler(cluster, "orders", 6, 2) as sampler:
        result = run_reassignment(admin, plan_for(TARGET), params, store, run_id="run-full",
                                  on_event=events.append)
    assert result.progress.outcome == "done" and result.steps_done == len(result.prepared.steps) >= 6
    assert placement(cluster, "orders", 6) == TARGET
    assert configs(cluster) == before, "throttle configs back to exactly what they were"
    assert sampler.samples > 10 and sampler.violations == [], "never below min.insync.replicas"
    assert store.get("run-full").restored
    # Leadership followed the preferred leader (it moves when the old leader leaves, or is elected
    # once the partition's last step is done).
    assert all(cluster.partition_state("orders", p)["leader"] == r[0] for p, r in TARGET.items())
    assert cluster.writes["AlterPartitionReassignments"] == len(result.prepared.steps), "each step submitted once"
    assert any("throttle restored" in e for e in events)


def test_dry_run_writes_nothing(env):
    cluster, admin, store = env()
    result = run_reassignment(admin, plan_for(TARGET), {"dry_run": True, **FAST}, store, run_id="dry")
    report = result.prepared.report()
    assert "KIP-435 step(s)" in report and "orders-0: [1,2,3] -> " in report
    assert "SET    broker 4: follower.replication.throttled.rate = '50000000'" in report
    assert cluster.write_count == 0 and store.get("dry") is None


def test_invalid_plan_writes_nothing(env):
    cluster, admin, store = env()
    bad = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2, 99]},
                                        {"topic": "orders", "partition": 1, "replicas": [1, 1, 2]},
                                        {"topic": "nope", "partition": 0, "replicas": [1, 2, 3]}]}
    with pytest.raises(PlanValidationError) as info:
        run_reassignment(admin, bad, FAST, store, run_id="bad")
    assert {"unknown_broker", "duplicate_replicas", "unknown_topic"} <= info.value.kinds
    assert cluster.write_count == 0 and store.get("bad") is None


def test_apply_and_restore_are_idempotent_and_record_first(env):
    cluster, admin, store = env()
    before = configs(cluster)
    prepared = prepare(admin, plan_for({0: [4, 5, 6]}), {"throttle_bytes_per_sec": 5_000_000})
    rec = apply_throttle(admin, prepared, store, "idem")
    assert store.get("idem").changes == rec.changes and all(c.prior is None for c in rec.changes)
    writes = cluster.write_count
    rec2 = apply_throttle(admin, prepared, store, "idem")
    assert cluster.write_count == writes, "second apply writes nothing"
    assert rec2.changes == rec.changes, "prior values are the ones from before the first write"
    restore_throttle(admin, store, "idem")
    assert configs(cluster) == before
    writes = cluster.write_count
    assert restore_throttle(admin, store, "idem").already_restored
    assert cluster.write_count == writes


def test_executor_adopts_its_moves_and_cancel_touches_only_ours(env):
    cluster, admin, store = env(time_scale=1.0)
    prepared = prepare(admin, plan_for({0: [4, 5, 6], 1: [5, 6, 1]}),
                       {"throttle_bytes_per_sec": 1_000_000, "max_partition_movements": 5})
    apply_throttle(admin, prepared, store, "ours")
    first = executor_for(prepared, "ours", store)
    first.tick(admin)
    assert sorted(prepared.steps[i].name for i in first.in_flight) == ["orders-0", "orders-1"]
    submits = cluster.writes["AlterPartitionReassignments"]
    # A second executor of the same run (a resumed worker without saved state) adopts them.
    again = executor_for(prepared, "ours", store)
    again.tick(admin)
    assert cluster.writes["AlterPartitionReassignments"] == submits and len(again.in_flight) == 2
    # Someone else starts moving clicks-0; our cancel must leave it alone. Throttled on
    # broker 4 (1 MB/s, set by ours) so its 2 MB are still moving when we look: unthrottled,
    # the copy is over in milliseconds, on Kafka as on the simulator.
    admin.alter_configs([ConfigChange("topic", "clicks", FOLLOWER_REPLICAS, None, "0:4")])
    admin.alter_partition_reassignments({("clicks", 0): [3, 4]})
    again.tick(admin)
    assert again.outcome().value == "in_progress"
    assert all(w.bytes_left > 0 and w.lagging for w in again.watches.values())
    out = cancel_in_flight(admin, prepared, submitted=run_submitted(store, "ours"))
    assert sorted(out["cancelled"]) == ["orders-0", "orders-1"] and out["left"] == []
    assert not set(admin.list_partition_reassignments()) & {("orders", 0), ("orders", 1)}
    # Theirs was not cancelled (a cancel would revert it to [1,2]): it reaches its target.
    assert cluster.wait_for(lambda: cluster.partition_state("clicks", 0)["replicas"] == [3, 4], timeout=30)
    assert placement(cluster, "orders", 2) == {0: [1, 2, 3], 1: [2, 3, 4]}
    restore_throttle(admin, store, "ours")


def test_a_run_adopting_a_dead_runs_moves_records_them_and_cancels_them(env):
    # Ours only when our record lists the target: a run that adopts the moves a killed run of
    # ours left in flight notes them in its own record, so its failure cancel reverts them.
    cluster, admin, store = env(time_scale=1.0)
    plan = plan_for({0: [4, 5, 6], 1: [5, 6, 1]})
    params = {"throttle_bytes_per_sec": 1_000_000, "max_partition_movements": 5}
    killed = prepare(admin, plan, params, run_id="killed")
    apply_throttle(admin, killed, store, "killed")
    executor_for(killed, "killed", store).tick(admin)
    assert set(admin.list_partition_reassignments()) == {("orders", 0), ("orders", 1)}
    second = prepare(admin, plan, params, run_id="second", own_targets=submitted_targets(store, None, "second"))
    apply_throttle(admin, second, store, "second")   # supersedes the killed run's record
    assert run_submitted(store, "second") == {}
    adopting = executor_for(second, "second", store)
    adopting.tick(admin)
    assert len(adopting.in_flight) == 2
    assert set(run_submitted(store, "second")) == {("orders", 0), ("orders", 1)}
    out = cancel_in_flight(admin, second, submitted=run_submitted(store, "second"))
    assert sorted(out["cancelled"]) == ["orders-0", "orders-1"] and out["left"] == []
    assert not set(admin.list_partition_reassignments())
    restore_throttle(admin, store, "second")


def test_executor_refuses_someone_elses_move(env):
    cluster, admin, store = env(time_scale=1.0)
    prepared = prepare(admin, plan_for({0: [4, 5, 6]}), {"throttle_bytes_per_sec": 1_000_000})
    admin.alter_configs([ConfigChange("broker", str(b), k, None, "100000") for b in range(1, 7)
                         for k in (LEADER_RATE, FOLLOWER_RATE)]
                        + [ConfigChange("topic", "orders", FOLLOWER_REPLICAS, None, "*"),
                           ConfigChange("topic", "orders", LEADER_REPLICAS, None, "*")])
    admin.alter_partition_reassignments({("orders", 0): [2, 3, 5]})
    ex = executor_for(prepared, "theirs", store)
    ex.tick(admin)
    assert ex.outcome().value == "failed"
    assert "orders-0 is being reassigned to [2, 3, 5] by someone else" in ex.message
    assert admin.list_partition_reassignments()[("orders", 0)].target == (2, 3, 5), "not touched"


def test_resume_after_killed_run_finishes_without_moving_finished_partitions(env):
    cluster, admin, store = env()
    before = configs(cluster)
    # 2 MB/s: a 20 MB step takes ~10 simulated seconds, so the moves in flight when run 1
    # dies are still in flight when run 2 reads the cluster (the bound below relies on it)
    params = {"throttle_bytes_per_sec": 2_000_000, "max_partition_movements": 6, **FAST}
    # Run 1 applies the throttle, finishes some steps with others in flight and dies (no cleanup).
    p1 = prepare(admin, plan_for(TARGET), params, run_id="killed")
    apply_throttle(admin, p1, store, "killed")
    run_execution(admin, executor_for(p1, "killed", store), None, poll_seconds=0.05,
                  should_stop=lambda v: v.steps_done >= 4 and v.steps_in_flight > 0)
    in_flight_then = set(admin.list_partition_reassignments())
    done_then = {p for p, r in TARGET.items() if cluster.partition_state("orders", p)["replicas"] == r}
    submits_before = cluster.writes["AlterPartitionReassignments"]
    # Run 2 (new run id) validates OK (in-flight moves are ours), adopts them and the stale record.
    result = run_reassignment(admin, plan_for(TARGET), params, store, run_id="resumed")
    assert placement(cluster, "orders", 6) == TARGET
    assert configs(cluster) == before, "the killed run's throttle is cleaned up too"
    assert store.list_unrestored() == []
    resubmitted = cluster.writes["AlterPartitionReassignments"] - submits_before
    # Each remaining step at most once; a move still in flight when run 2 looked was adopted, not
    # submitted again (one that finished in between is simply no longer a step).
    assert resubmitted <= len(result.prepared.steps)
    assert not {s.key for s in result.prepared.steps if s.step_index == 0} & in_flight_then or \
        resubmitted < len(result.prepared.steps), "in-flight steps adopted"
    for p in done_then:
        assert all(s.partition != p for s in result.prepared.steps), "finished partitions are not moved again"


def test_log_dir_moves(env):
    cluster, admin, store = env()
    plan = {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["/data/d1", "any", "/data/d1"]},
        {"topic": "orders", "partition": 1, "replicas": [2, 3, 5], "log_dirs": ["any", "any", "/data/d1"]},
        # Every replica replaced, one per step under min ISR 2: each is told its dir when added.
        {"topic": "orders", "partition": 2, "replicas": [6, 1, 2], "log_dirs": ["/data/d1", "/data/d1", "any"]}]}
    assert cluster.partition_state("orders", 2)["replicas"] == [3, 4, 5]
    before = configs(cluster)
    dir_moves: list[dict] = []

    class Recording:
        def __getattr__(self, name: str) -> Any:
            return getattr(admin, name)

        def alter_replica_log_dirs(self, moves: dict) -> dict:
            dir_moves.append(dict(moves))
            return admin.alter_replica_log_dirs(moves)

    result = run_reassignment(Recording(), plan, {"throttle_bytes_per_sec": 10_000_000, **FAST}, store,
                              run_id="dirs")
    st0, st1 = cluster.partition_state("orders", 0), cluster.partition_state("orders", 1)

    def told(replica: tuple[str, int, int]) -> list[str]:
        """The dirs AlterReplicaLogDirs requests named for this replica, in order."""
        return [m[replica] for m in dir_moves if replica in m]

    assert st0["log_dirs"][1] == "/data/d1" and st0["log_dirs"][3] == "/data/d1" and st0["replicas"] == [1, 2, 3]
    assert st1["replicas"] == [2, 3, 5] and st1["log_dirs"][5] == "/data/d1"
    # The new replica on broker 5 was created in /data/d1 directly (told before it existed): its
    # log-dir step found it there and had nothing to do.
    assert told(("orders", 1, 5)) == ["/data/d1"]
    assert {("orders", 0, 1), ("orders", 0, 3)} <= {k for m in dir_moves for k in m}
    # p2's replicas on 6 and 1, added by different steps, were created in /data/d1: one pre-set
    # each, no move between dirs afterwards (which would copy the partition a second time).
    st2 = cluster.partition_state("orders", 2)
    assert st2["replicas"] == [6, 1, 2] and st2["log_dirs"][6] == st2["log_dirs"][1] == "/data/d1"
    assert told(("orders", 2, 6)) == told(("orders", 2, 1)) == ["/data/d1"]
    assert result.progress.outcome == "done"
    assert any("replica.alter.log.dirs.io.max.bytes.per.second" == c.key for c in result.prepared.throttle_changes)
    assert configs(cluster) == before


def test_stall_when_throttle_below_produce_rate_cancels_and_restores(env):
    cluster, admin, store = env(time_scale=10.0, orders={
        "partitions": 2, "rf": 3, "size_bytes": 5_000_000, "bytes_in_per_sec": 3_000_000,
        "configs": {"min.insync.replicas": "2"}})
    before = configs(cluster)
    # The pre-flight would refuse this plan (3 MB/s written, 1 MB/s throttle); allowed here to
    # exercise the runtime stall detector.
    params = {"throttle_bytes_per_sec": 1_000_000, "poll_interval_seconds": 0.05, "stall_window_seconds": 10.0,
              "batch_timeout_minutes": 1, "allow_stalling_moves": True}
    with pytest.raises(RunFailed) as info:
        # Simulated time as the clock: rates and windows in the cluster's seconds.
        run_reassignment(admin, plan_for({0: [4, 2, 3]}), params, store, run_id="stall", clock=cluster.sim_time)
    msg = str(info.value)
    assert info.value.outcome.value == "stalled"
    assert re.search(r"orders-0 stalled: its new replica on broker 4 .* throttle 1\.0 MB/s, produce rate "
                     r"(2\.[89]|3\.[01]) MB/s into orders-0", msg), msg
    assert "raise throttle_bytes_per_sec above" in msg
    assert admin.list_partition_reassignments() == {}, "cancel_on_failure left nothing in flight"
    assert configs(cluster) == before
    # Kafka reverts a cancel to replicas - adding ([2,3,1]); we put the original order back.
    assert cluster.wait_for(lambda: cluster.partition_state("orders", 0)["replicas"] == [1, 2, 3], timeout=10)


def test_restore_keeps_values_someone_else_set_during_the_run(env):
    cluster, admin, store = env()
    prepared = prepare(admin, plan_for({0: [4, 5, 6]}), {"throttle_bytes_per_sec": 5_000_000})
    apply_throttle(admin, prepared, store, "drift")
    executor_for(prepared, "drift", store).tick(admin)  # the first step goes: its replica lists are set
    admin.alter_configs([ConfigChange("broker", "4", LEADER_RATE, "5000000", "7000000"),
                         ConfigChange("topic", "orders", FOLLOWER_REPLICAS, None,
                                      cluster.topic_configs("orders")[FOLLOWER_REPLICAS] + ",4:9")])
    res = restore_throttle(admin, store, "drift")
    assert any("broker 4 leader.replication.throttled.rate is '7000000'" in w and "kept theirs" in w
               for w in res.warnings), res.warnings
    assert cluster.broker_configs(4)[LEADER_RATE] == "7000000", "a rate someone else set during the run is theirs"
    assert cluster.topic_configs("orders").get(FOLLOWER_REPLICAS) == "4:9", "their entry is kept"
    assert res.done and store.get("drift").restored


class RefusingStore(FileRecordStore):
    """A record store whose disk is full: nothing may be written to Kafka then."""

    def put(self, record: Any) -> None:
        from kafka_reassign.errors import ThrottleRecordError
        raise ThrottleRecordError("disk full")


def test_record_is_written_before_any_config(env, tmp_path):
    from kafka_reassign.errors import ThrottleRecordError
    cluster, admin, _ = env()
    prepared = prepare(admin, plan_for({0: [4, 5, 6]}), {"throttle_bytes_per_sec": 5_000_000})
    with pytest.raises(ThrottleRecordError):
        apply_throttle(admin, prepared, RefusingStore(tmp_path / "full"), "no-record")
    assert cluster.write_count == 0


class FlakyAdmin:
    """The real KafkaAdmin (real TCP), whose first config writes fail like a controller move would."""

    def __init__(self, admin: KafkaAdmin, failures: int) -> None:
        self._admin, self.failures = admin, failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._admin, name)

    def alter_configs(self, changes: Any) -> None:
        from kafka_reassign.errors import KafkaAdminError
        if self.failures > 0:
            self.failures -= 1
            raise KafkaAdminError("IncrementalAlterConfigs", "REQUEST_TIMED_OUT", "injected")
        self._admin.alter_configs(changes)


def test_restore_retries_transient_failures(env):
    cluster, admin, store = env()
    before = configs(cluster)
    prepared = prepare(admin, plan_for({0: [4, 5, 6]}), {"throttle_bytes_per_sec": 5_000_000})
    apply_throttle(admin, prepared, store, "flaky")
    assert configs(cluster) != before
    res = restore_throttle(FlakyAdmin(admin, failures=2), store, "flaky", wait_max_seconds=0.2)
    assert configs(cluster) == before and res.changes and store.get("flaky").restored


def test_sampled_snapshot_rates_feed_the_produce_rate_warning(env):
    from kafka_reassign.cluster.snapshot import read_cluster_snapshot
    from kafka_reassign.cluster.state import rates_from_snapshot
    cluster, admin, store = env(time_scale=1.0, orders={
        "partitions": 2, "rf": 3, "size_bytes": 5_000_000, "bytes_in_per_sec": 3_000_000,
        "configs": {"min.insync.replicas": "2"}})
    snap = read_cluster_snapshot(admin, sample_seconds=0.5)
    rates = rates_from_snapshot(snap)
    assert 2_000_000 < rates[("orders", 0)] < 4_000_000
    with pytest.raises(PreflightError) as info:
        prepare(admin, plan_for({0: [4, 2, 3]}), {"throttle_bytes_per_sec": 1_000_000}, produce_rates=rates)
    assert "orders-0" in str(info.value) and "broker(s) 1,4" in str(info.value)
    prepared = prepare(admin, plan_for({0: [4, 2, 3]}), {"throttle_bytes_per_sec": 1_000_000,
                                                         "allow_stalling_moves": True}, produce_rates=rates)
    assert any("allow_stalling_moves is set" in w and "orders-0" in w for w in prepared.warnings)
    assert prepared.estimated_seconds == float("inf")
    assert "never" in prepared.report()
    assert cluster.write_count == 0


def test_cancel_stops_our_log_dir_move(env):
    cluster, admin, store = env(time_scale=1.0)
    plan = {"version": 1, "partitions": [
        {"topic": "orders", "partition": 2, "replicas": [3, 4, 5], "log_dirs": ["/data/d1", "any", "any"]}]}
    prepared = prepare(admin, plan, {"throttle_bytes_per_sec": 1_000_000})
    apply_throttle(admin, prepared, store, "dircancel")
    ex = executor_for(prepared, "dircancel", store)
    ex.tick(admin)
    assert [prepared.steps[i].name for i in ex.in_flight] == ["orders-2"]
    assert cluster.wait_for(lambda: cluster.partition_state("orders", 2)["future_log_dirs"].get(3) == "/data/d1",
                            timeout=5)
    ex.tick(admin)
    (watch,) = ex.watches.values()
    assert ex.outcome().value == "in_progress" and watch.lagging and watch.lagging[0][0] == 3
    out = cancel_in_flight(admin, prepared, submitted=run_submitted(store, "dircancel"))
    assert out["cancelled"] == ["orders-2@3"]
    st = cluster.partition_state("orders", 2)
    assert st["future_log_dirs"] == {} and st["log_dirs"][3] == "/data/d0"
    restore_throttle(admin, store, "dircancel")


def test_restore_waits_out_a_broker_still_showing_the_value_before_our_write(env):
    # A KRaft broker shows a committed config write a moment later. Read at once, our rate
    # written just before (the guard putting back a deleted throttle as the run ends) reads
    # "not set": taken as theirs, nothing would be restored and our write would stay.
    cluster, admin, store = env()
    cluster.model.config_read_lag = 1.0
    prepared = prepare(admin, plan_for({0: [4, 5, 6]}), {"throttle_bytes_per_sec": 5_000_000})
    apply_throttle(admin, prepared, store, "stale")
    res = restore_throttle(admin, store, "stale")
    assert not any("kept theirs" in w for w in res.warnings), res.warnings
    time.sleep(1.2)  # every write is visible now
    assert all(LEADER_RATE not in cluster.broker_configs(b) for b in range(1, 7)), "nothing of ours left"
    assert res.done and store.get("stale").restored
