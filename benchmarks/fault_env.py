"""The fault matrix's test bed: a fresh simulated cluster, the others' throttles, runs, and the score.

Used by the scenarios of :mod:`benchmarks.fault_scenarios`; :mod:`benchmarks.faults` runs them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kafka_reassign.throttle.specs import (
    BROKER_KEYS, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, TOPIC_KEYS, ConfigChange, parse_replica_list,
)

if TYPE_CHECKING:
    from kafka_sim import SimulatedCluster

BROKERS = 6
SETTING = tuple[str, str, str]
#: Throttles "someone else" set before every run: a rate on broker 6, a replica list on clicks.
OTHERS_BEFORE: dict[SETTING, str] = {("broker", "6", LEADER_RATE): "70000000",
                                     ("topic", "clicks", FOLLOWER_REPLICAS): "0:3"}


def snapshot(size_bytes: int = 20_000_000, bytes_in_per_sec: float = 0) -> dict[str, Any]:
    """6 brokers in 3 racks; ``orders`` 6 x RF3 (min ISR 2) and ``clicks`` 2 x RF2."""
    brokers = [{"id": b, "rack": f"rack-{(b - 1) % 3}",
                "log_dirs": [{"path": "/data/d0", "capacity_bytes": 1e12}, {"path": "/data/d1", "capacity_bytes": 1e12}]}
               for b in range(1, BROKERS + 1)]

    def parts(n: int, rf: int, size: int, rate: float) -> list[dict[str, Any]]:
        out = []
        for p in range(n):
            replicas = [(p + i) % BROKERS + 1 for i in range(rf)]
            out.append({"partition": p, "replicas": replicas, "leader": replicas[0], "size_bytes": size,
                        "bytes_in_per_sec": rate, "log_dirs": ["/data/d0"] * rf})
        return out

    return {"version": 1, "brokers": brokers, "topics": [
        {"name": "orders", "configs": {"min.insync.replicas": "2"},
         "partitions": parts(6, 3, size_bytes, bytes_in_per_sec)},
        {"name": "clicks", "configs": {}, "partitions": parts(2, 2, 1_000_000, 0)}]}


def plan_of(*moves: tuple[str, int, list[int]], original: bool = False,
            cluster: SimulatedCluster | None = None) -> dict[str, Any]:
    """A reassignment plan; with ``original`` each entry carries the live replicas as its start."""
    entries = []
    for t, p, r in moves:
        e: dict[str, Any] = {"topic": t, "partition": p, "replicas": list(r)}
        if original:
            e["original_replicas"] = cluster.partition_state(t, p)["replicas"]
        entries.append(e)
    return {"version": 1, "partitions": entries}


#: Fast polling, in the simulator's seconds.
FAST = {"poll_interval_seconds": 0.1, "stall_window_seconds": 30.0, "batch_timeout_minutes": 2}


@dataclass
class Outcome:
    """What one scenario left behind.

    :param faults: faults injected (broker stops, throttle edits by others, kills...)
    :param runs: reassignment runs attempted
    :param leftovers: our throttle values or entries still set after the reconciler
    :param foreign: values of others that are not what they set
    :param details: scenario-specific facts the tests check
    """

    name: str
    faults: int = 0
    runs: int = 0
    leftovers: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


class Env:
    """A fresh simulated cluster, an admin client, a record directory and the others' throttles.

    :param time_scale: simulated seconds per wall-clock second
    """

    def __init__(self, workdir: Path, time_scale: float = 1.0, **snap: Any) -> None:
        from kafka_reassign.cluster.admin import KafkaAdmin
        from kafka_reassign.throttle.record import FileRecordStore
        from kafka_sim import SimulatedCluster

        self.cluster = SimulatedCluster(snapshot(**snap), time_scale=time_scale)
        self.cluster.start()
        self.bootstrap = self.cluster.bootstrap_servers
        self.admin = KafkaAdmin(bootstrap_servers=self.bootstrap.split(","), retry_max_seconds=10)
        self.record_dir = workdir / "records"
        self.store = FileRecordStore(self.record_dir)
        self.others: dict[SETTING, str | None] = dict(OTHERS_BEFORE)
        self.others_set(dict(OTHERS_BEFORE))
        self.outcome = Outcome("")

    def close(self) -> None:
        self.admin.close()
        self.cluster.stop()

    # -- what others do -------------------------------------------------------------------
    def others_set(self, values: dict[SETTING, str | None]) -> None:
        """Someone else writes throttle configs (None deletes); the end state must keep them."""
        self.admin.alter_configs([ConfigChange(r, n, k, None, v) for (r, n, k), v in values.items()])
        self.others.update(values)

    def fault(self, n: int = 1) -> None:
        self.outcome.faults += n

    def stop(self, *brokers: int) -> None:
        for b in brokers:
            self.cluster.stop_broker(b)
        self.fault(len(brokers))

    def start(self, *brokers: int) -> None:
        for b in brokers:
            self.cluster.start_broker(b)

    # -- reading back ----------------------------------------------------------------------
    def throttles(self) -> dict[SETTING, str]:
        """Every throttle config set on the cluster (the simulator's own view)."""
        out: dict[SETTING, str] = {}
        for b in range(1, BROKERS + 1):
            for k, v in self.cluster.broker_configs(b).items():
                if k in BROKER_KEYS:
                    out[("broker", str(b), k)] = v
        for t in ("orders", "clicks"):
            for k, v in self.cluster.topic_configs(t).items():
                if k in TOPIC_KEYS:
                    out[("topic", t, k)] = v
        return out

    def wait_idle(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.admin.list_partition_reassignments():
            if time.monotonic() > deadline:
                raise TimeoutError("reassignments did not finish")
            time.sleep(0.2)

    def reconcile(self, **kw: Any) -> Any:
        from kafka_reassign.throttle.reconciler import reconcile

        return reconcile(self.admin, self.store, **kw)

    def finish(self) -> Outcome:
        """Bring every broker back, wait for moves, run the reconciler, score what is left."""
        for b in range(1, BROKERS + 1):
            if not self.cluster.model.brokers[b].alive:
                self.cluster.start_broker(b)
        self.wait_idle()
        report = self.reconcile()
        self.outcome.details["final_reconcile"] = report.summary()
        now = self.throttles()
        for key, value in sorted(now.items()):
            theirs = self.others.get(key)
            if theirs is None:
                self.outcome.leftovers.append(f"{' '.join(key)}={value}")
            elif value != theirs:
                extra = _extra_entries(key[2], value, theirs)
                (self.outcome.leftovers if extra else self.outcome.foreign).append(
                    f"{' '.join(key)}={value} (theirs: {theirs})")
        for key, theirs in sorted(self.others.items()):
            if theirs is not None and key not in now:
                self.outcome.foreign.append(f"{' '.join(key)} deleted (theirs: {theirs})")
        return self.outcome


def _extra_entries(key: str, value: str, theirs: str) -> bool:
    """Whether a replica list holds everything of theirs plus entries of ours."""
    if key not in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        return False
    now, t = parse_replica_list(value), parse_replica_list(theirs)
    return isinstance(now, set) and isinstance(t, set) and t < now


def run_plan(env: Env, plan: dict[str, Any], params: dict[str, Any], run_id: str, **kw: Any) -> Any:
    """One run of ``plan`` through the domain loop at fast polling; its events go to the details."""
    from kafka_reassign.run.reassign import run_reassignment

    env.outcome.runs += 1
    events: list[str] = env.outcome.details.setdefault("events", [])
    return run_reassignment(env.admin, plan, {**FAST, **params}, env.store, run_id=run_id,
                            on_event=events.append, **kw)


def moves_done_then(env: Env, plan: dict[str, Any], params: dict[str, Any], run_id: str) -> Any:
    """Prepare, throttle, run the executor (submissions recorded) to the end: a run up to its teardown."""
    from kafka_reassign.execution.executor import run_execution
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.run.reassign import executor_for
    from kafka_reassign.throttle.apply import apply_throttle

    env.outcome.runs += 1
    prepared = prepare(env.admin, plan, {**FAST, **params}, run_id=run_id)
    apply_throttle(env.admin, prepared, env.store, run_id)
    run_execution(env.admin, executor_for(prepared, run_id, env.store), None,
                  poll_seconds=prepared.params.poll_interval_seconds)
    return prepared


def once_moving(action: Callable[[], None]) -> Callable[[Any], None]:
    """A progress callback that runs ``action`` once, at the first poll with bytes still to copy."""
    done: list[bool] = []

    def on_progress(prog: Any) -> None:
        if not done and prog.bytes_left > 0:
            done.append(True)
            action()

    return on_progress
