"""The pipelined executor against the simulator over TCP: window, caps, throttle lists, stalls, resume.

Timelines are recorded from the cluster's side: an observer thread with its own admin client
lists the reassignments in flight over the wire, independent of what the executor believes.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.errors import ParamError
from kafka_reassign.execution.store import FileExecutionStore, MemoryExecutionStore
from kafka_reassign.run.reassign import RunFailed, run_reassignment
from kafka_reassign.throttle.record import FileRecordStore, MemoryRecordStore
from kafka_reassign.throttle.specs import FOLLOWER_REPLICAS, LEADER_REPLICAS, parse_replica_list

FAST = {"poll_interval_seconds": 0.05, "stall_window_seconds": 60, "batch_timeout_minutes": 5,
        "produce_sample_seconds": 0}


def snapshot(sizes: list[int], brokers: int = 6, bytes_in: float = 0) -> dict:
    """Topic ``t``: partition p on brokers 1-3, leaders spread over them."""
    from sim_snapshots import make_snapshot

    snap = make_snapshot(brokers=brokers, topics={"t": {
        "partitions": len(sizes), "rf": 3, "bytes_in_per_sec": bytes_in,
        "replicas": [[1 + (p + i) % 3 for i in range(3)] for p in range(len(sizes))]}})
    for p, size in zip(snap["topics"][0]["partitions"], sizes):
        p["size_bytes"] = size
    return snap


def plan_to_456(n: int) -> dict:
    return {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [4 + (p + i) % 3 for i in range(3)]}
                                         for p in range(n)]}


class Listing(threading.Thread):
    """Lists reassignments in flight over the wire every few ms: [(sim time, {partition: InFlight})]."""

    def __init__(self, cluster: Any) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)
        self.samples: list[tuple[float, dict]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((self.cluster.sim_time(), self.admin.list_partition_reassignments(None)))
            time.sleep(0.003)
        self.admin.close()

    def __enter__(self) -> "Listing":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.done.set()
        self.join(5)


def test_window_refills_before_the_slowest_move_ends_and_caps_hold_at_every_poll(sim_cluster):
    """One big partition and many small ones: small ones keep starting while the big one moves."""
    sizes = [400_000_000] + [10_000_000] * 11
    cluster = sim_cluster(snapshot(sizes), time_scale=20.0)
    lists_seen: list[tuple[set, set]] = []
    records = MemoryRecordStore()
    recorded: list[int] = []
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin, \
            KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as reader, Listing(cluster) as listing:

        def on_progress(view: Any) -> None:
            # Right after a refill the lists name exactly the partitions of the steps in flight.
            moving = {int(r.name.rsplit("-", 1)[1]) for r in view.rows if r.status == "in_flight"}
            cfg = reader.describe_configs(topics=["t"], keys=[LEADER_REPLICAS, FOLLOWER_REPLICAS])[("topic", "t")]
            named = {p for k in (LEADER_REPLICAS, FOLLOWER_REPLICAS) for p, _ in parse_replica_list(cfg[k]) or ()}
            lists_seen.append((named, moving))
            recorded.extend(len(r.submitted) for r in records.list_all())

        result = run_reassignment(admin, plan_to_456(len(sizes)),
                                  {**FAST, "throttle_bytes_per_sec": 20_000_000, "max_partition_movements": 4,
                                   "max_movements_per_broker": 2}, records, on_progress=on_progress,
                                  on_event=lambda m: None)
    assert result.progress.outcome == "done"
    # Caps at every observation of the cluster (not only at the executor's polls).
    busy = [(t, inf) for t, inf in listing.samples if inf]
    assert len(busy) > 50
    for t, inf in busy:
        assert len(inf) <= 4, (t, inf)
        per_broker: dict[int, int] = {}
        for f in inf.values():
            for b in {*f.adding, *f.removing}:
                per_broker[b] = per_broker.get(b, 0) + 1
        assert max(per_broker.values()) <= 2, (t, inf)
    # Pipelining: while t-0 (the slowest) was moving, other partitions started after it.
    big = [t for t, inf in busy if ("t", 0) in inf]
    started_later = {k for t, inf in busy if big[0] < t < big[-1] for k in inf} - {k for k in busy[0][1]}
    assert started_later, "nothing was submitted while the slowest move was in flight"
    # The throttled-replica lists never named a partition that was not in flight.
    assert lists_seen and all(named <= moving for named, moving in lists_seen), lists_seen[:5]
    assert any(named for named, _ in lists_seen)
    # The record names the moves in flight only (bounded by the window, not the plan's 12).
    assert recorded and max(recorded) <= 4, recorded
    assert cluster.topic_configs("t").get(LEADER_REPLICAS) is None  # restored: nothing left behind


def test_stalled_move_fails_naming_partition_broker_throttle_and_produce_rate(sim_cluster):
    """A produce rate above the throttle never lets the new replica catch up (KIP-73)."""
    cluster = sim_cluster(snapshot([20_000_000], bytes_in=3_000_000), time_scale=20.0)
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 2, 3]}]}
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        with pytest.raises(RunFailed) as info:
            run_reassignment(admin, plan, {**FAST, "stall_window_seconds": 20, "throttle_bytes_per_sec": 1_000_000,
                                           "allow_stalling_moves": True}, MemoryRecordStore(),
                             on_event=lambda m: None, clock=cluster.sim_time, sleep=lambda s: time.sleep(s / 20))
    msg = str(info.value)
    assert info.value.outcome.value == "stalled"
    assert "t-0" in msg and "broker 4" in msg and "throttle 1.0 MB/s" in msg and "produce rate" in msg
    rate = float(msg.split("produce rate ", 1)[1].split(" MB/s", 1)[0])
    assert 2.0 <= rate <= 4.0, msg  # measured from the leader's log growth
    # cancel_on_failure reverted the move and the throttle is gone.
    assert cluster.partition_state("t", 0)["replicas"] == [1, 2, 3]
    assert cluster.topic_configs("t") == {} and cluster.broker_configs(4) == {}


@pytest.mark.parametrize("params, problem", [({"max_partition_movements": 0}, "max_partition_movements"),
                                             ({"max_movements_per_broker": -2}, "max_movements_per_broker")])
def test_bad_limits_are_refused_before_any_write(sim_cluster, params, problem):
    cluster = sim_cluster(snapshot([1_000_000] * 3), time_scale=20.0)
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        with pytest.raises(ParamError, match=problem):
            run_reassignment(admin, plan_to_456(3), {**FAST, **params}, MemoryRecordStore(), on_event=lambda m: None)
        with pytest.raises(ParamError, match="unknown ordering strategy"):
            run_reassignment(admin, plan_to_456(3), FAST, MemoryRecordStore(), strategy="shuffle",
                             on_event=lambda m: None)
    assert cluster.write_count == 0


class RecordingAdmin:
    """A real KafkaAdmin whose AlterPartitionReassignments targets are kept for assertions."""

    def __init__(self, admin: KafkaAdmin) -> None:
        self._admin = admin
        self.submitted: list[tuple[tuple[str, int], tuple[int, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._admin, name)

    def alter_partition_reassignments(self, targets: dict) -> dict:
        self.submitted += [(k, tuple(v)) for k, v in targets.items() if v is not None]
        return self._admin.alter_partition_reassignments(targets)


def test_kill_9_mid_run_then_resume_resubmits_nothing_complete(sim_cluster, tmp_path: Path):
    n = 12
    cluster = sim_cluster(snapshot([30_000_000] * n), time_scale=10.0)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan_to_456(n)))
    records = tmp_path / "records"
    cmd = [sys.executable, "-m", "kafka_reassign.cli.main", "execute", "--bootstrap-server", cluster.bootstrap_servers,
           "--plan", str(plan_file), "--throttle", "20000000", "--max-movements-per-broker", "2",
           "--poll-interval-seconds", "0.05", "--produce-sample-seconds", "0", "--record-dir", str(records),
           "--run-id", "killed"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    store = FileExecutionStore(records)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            saved = store.load("killed") if store.path_for("killed").exists() else None
            if saved and saved["progress"]["steps_done"] >= 6:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the first run did not get going")
    finally:
        proc.send_signal(signal.SIGKILL)  # no cleanup at all: no cancel, no restore
        proc.wait(10)
    # What the cluster holds at the kill: partitions at rest and the replica lists they reached.
    at_rest = {}
    for p in range(n):
        st = cluster.partition_state("t", p)
        if not st["adding"] and not st["removing"]:
            at_rest[("t", p)] = tuple(st["replicas"])
    assert cluster.topic_configs("t"), "the killed run left its throttle behind (as a kill -9 does)"
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        rec = RecordingAdmin(admin)
        result = run_reassignment(rec, plan_file.read_text(), {**FAST, "throttle_bytes_per_sec": 20_000_000,
                                                               "max_movements_per_broker": 2},
                                  FileRecordStore(records), run_id="killed", exec_store=store,
                                  on_event=lambda m: None)
    assert result.progress.outcome == "done"
    # Nothing that had completed was submitted again: no partition at rest was sent where it was.
    assert not [(k, t) for k, t in rec.submitted if at_rest.get(k) == t]
    done_partitions = [k for k, reps in at_rest.items() if list(reps) == plan_to_456(n)["partitions"][k[1]]["replicas"]]
    assert not [k for k, _ in rec.submitted if k in done_partitions]
    for p, e in enumerate(plan_to_456(n)["partitions"]):
        assert cluster.partition_state("t", p)["replicas"] == e["replicas"]
    assert cluster.topic_configs("t") == {} and all(cluster.broker_configs(b) == {} for b in range(1, 7))


def test_resume_with_the_same_steps_continues_from_the_saved_state(sim_cluster):
    """The DAG's resume: same prepared steps, state from the store; done steps stay done."""
    from kafka_reassign.execution.executor import run_execution
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.run.reassign import executor_for
    from kafka_reassign.throttle.apply import apply_throttle
    from kafka_reassign.throttle.restore import restore_throttle

    cluster = sim_cluster(snapshot([20_000_000] * 8), time_scale=20.0)
    records, store = MemoryRecordStore(), MemoryExecutionStore()
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        prepared = prepare(admin, plan_to_456(8), {**FAST, "throttle_bytes_per_sec": 30_000_000})
        apply_throttle(admin, prepared, records, "r1")
        first = executor_for(prepared, "r1", records)
        run_execution(admin, first, store, poll_seconds=0.05, should_stop=lambda v: v.steps_done >= 5)
        saved = store.load("r1")
        done_before = {i for i, c in first.status.items() if c == "d"}
        rec = RecordingAdmin(admin)
        second = executor_for(prepared, "r1", records, saved=saved)
        view = run_execution(rec, second, store, poll_seconds=0.05)
        restore_throttle(admin, records, "r1")
    assert view.outcome == "done" and len(done_before) >= 5
    resubmitted = {(s.key, s.target) for i, s in enumerate(prepared.steps) if i in done_before}
    assert not [x for x in rec.submitted if x in resubmitted]
