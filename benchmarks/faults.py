"""Fault matrix: inject each fault of the README's table into a run against the simulator.

Each scenario starts a fresh simulated cluster (real TCP, the simulator's fault commands
``stop_broker`` / ``start_broker``), sets throttles of "someone else" before the run, runs a
reassignment through the domain loop (:func:`kafka_reassign.run.reassign.run_reassignment`, or
its steps one by one where the fault must land between two of them), injects the fault,
lets the reconciler do its job (:func:`kafka_reassign.throttle.reconciler.reconcile`, as the
``kafka_throttle_reconciler`` DAG does) and then compares every throttle config with what it
should be:

* a *leftover* is a throttle value or replica-list entry of ours still set;
* a *foreign change* is a value of someone else's that is no longer what they set.

``make bench`` prints faults injected, runs, leftovers and foreign changes (goal: 0 and 0).
``tests/integration/test_fault_matrix.py`` runs the same scenarios one test per row and
checks what each run did.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kafka_reassign.throttle.specs import (BROKER_KEYS, FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS,
                                     TOPIC_KEYS, ConfigChange, parse_replica_list)

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


def plan_of(*moves: tuple[str, int, list[int]], original: bool = False, cluster: Any = None) -> dict[str, Any]:
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


def _run(env: Env, plan: dict[str, Any], params: dict[str, Any], run_id: str, **kw: Any) -> Any:
    from kafka_reassign.run.reassign import run_reassignment

    env.outcome.runs += 1
    events: list[str] = env.outcome.details.setdefault("events", [])
    return run_reassignment(env.admin, plan, {**FAST, **params}, env.store, run_id=run_id,
                            on_event=events.append, **kw)


def _moves_done_then(env: Env, plan: dict[str, Any], params: dict[str, Any], run_id: str) -> Any:
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


# -- the rows of the matrix -------------------------------------------------------------------

def broker_dead_at_teardown(env: Env) -> None:
    """Broker 1 dies after the moves, before the teardown: the others are restored, 1 is pending."""
    from kafka_reassign.throttle.restore import restore_throttle

    _moves_done_then(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 50_000_000}, "dead-b1")
    env.stop(1)
    res = restore_throttle(env.admin, env.store, "dead-b1", attempts=2, wait_max_seconds=0.5)
    d = env.outcome.details
    d["restore"], d["message"] = res, res.message()
    d["left_while_down"] = {k: v for k, v in env.throttles().items() if env.others.get(k) != v}
    d["reconcile_while_down"] = env.reconcile()
    d["record_after_first_reconcile"] = env.store.get("dead-b1")
    env.start(1)
    d["reconcile_after_restart"] = env.reconcile()


def once_moving(action: Callable[[], None]) -> Callable[[Any], None]:
    """A progress callback that runs ``action`` once, at the first poll with bytes still to copy."""
    done: list[bool] = []

    def on_progress(prog: Any) -> None:
        if not done and prog.bytes_left > 0:
            done.append(True)
            action()

    return on_progress


def broker_restart_mid_move(env: Env) -> None:
    """A receiving broker stops mid-move and comes back within the stall window: the run goes on."""
    d = env.outcome.details

    def stop_then_restart() -> None:
        env.stop(4)
        threading.Timer(1.5, lambda: (env.start(4), d.setdefault("restarted_at", time.monotonic()))).start()

    res = _run(env, plan_of(("orders", 0, [4, 2, 3]), ("orders", 5, [6, 4, 2])),
               {"throttle_bytes_per_sec": 10_000_000}, "restart-b4", on_progress=once_moving(stop_then_restart))
    d["result"] = res
    t0 = time.monotonic()
    d["log_dirs_rows_after_restart"] = len(env.admin.describe_log_dirs([4]))
    d["log_dirs_read_seconds"] = time.monotonic() - t0


def throttle_deleted_mid_run(env: Env) -> None:
    """Someone deletes our rates on one broker and raises them on another mid-run: the guard re-applies."""
    d = env.outcome.details

    def edit() -> None:
        # Broker 4 receives: its follower rate deleted; broker 1 sends: its leader rate raised.
        env.others_set({("broker", "4", FOLLOWER_RATE): None, ("broker", "1", LEADER_RATE): "900000000"})
        env.fault(2)
        d["after_edit"] = env.throttles()

    d["result"] = _run(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 5_000_000},
                       "guarded", on_progress=once_moving(edit))
    d["record"] = env.store.get("guarded")
    d["end"] = env.throttles()


def others_throttle_changes_mid_run(env: Env) -> None:
    """Others append to our replica list, lower one of our rates and throttle another broker mid-run."""
    d = env.outcome.details

    def edit() -> None:
        follower = env.cluster.topic_configs("orders").get(FOLLOWER_REPLICAS, "")
        env.others_set({("topic", "orders", FOLLOWER_REPLICAS): follower + ",3:6",
                        ("broker", "4", LEADER_RATE): "1000000", ("broker", "5", FOLLOWER_RATE): "3000000"})
        env.fault(3)

    d["result"] = _run(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 5_000_000},
                       "others-mid-run", on_progress=once_moving(edit))
    # Our entry is gone from the list; theirs stays: theirs is "3:6" alone.
    env.others[("topic", "orders", FOLLOWER_REPLICAS)] = "3:6"
    d["end"] = env.throttles()


def others_in_flight(env: Env) -> None:
    """Another tool reassigns orders-2 to the plan's own target: the plan is refused, nothing touched."""
    from kafka_reassign.errors import PlanValidationError

    d = env.outcome.details
    # Their own slow throttle keeps their move in flight for a while.
    env.others_set({("broker", "3", LEADER_RATE): "2000000", ("broker", "6", FOLLOWER_RATE): "2000000",
                    ("topic", "orders", LEADER_REPLICAS): "2:3,2:4,2:5", ("topic", "orders", FOLLOWER_REPLICAS): "2:6"})
    env.admin.alter_partition_reassignments({("orders", 2): [6, 4, 5]})
    env.fault(1)
    writes = env.cluster.write_count
    try:
        _run(env, plan_of(("orders", 2, [6, 4, 5]), ("orders", 0, [4, 2, 3])), {}, "sees-foreign")
    except PlanValidationError as exc:
        d["error"] = exc
    d["writes_by_us"] = env.cluster.write_count - writes
    d["their_move"] = env.admin.list_partition_reassignments([("orders", 2)])
    env.wait_idle()
    d["their_result"] = env.cluster.partition_state("orders", 2)["replicas"]


def kafka_unreachable_short(env: Env) -> None:
    """Every broker is down when the teardown starts and back 1.5 s later: the restore retries through it."""
    from kafka_reassign.throttle.restore import restore_throttle

    _moves_done_then(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 50_000_000}, "blip")
    env.stop(*range(1, BROKERS + 1))
    threading.Timer(1.5, lambda: env.start(*range(1, BROKERS + 1))).start()
    env.outcome.details["restore"] = restore_throttle(env.admin, env.store, "blip", attempts=5,
                                                      wait_max_seconds=2.0)


def kafka_unreachable_long(env: Env) -> None:
    """Every broker is down for the whole teardown: everything pending, named; the reconciler finishes."""
    from kafka_reassign.throttle.restore import restore_throttle

    _moves_done_then(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 50_000_000}, "outage")
    env.stop(*range(1, BROKERS + 1))
    res = restore_throttle(env.admin, env.store, "outage", attempts=1)
    env.outcome.details.update(restore=res, message=res.message(), record=env.store.get("outage"))
    env.start(*range(1, BROKERS + 1))
    env.outcome.details["reconcile"] = env.reconcile()


RUNNER = """
import json, sys
from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.run.reassign import run_reassignment
from kafka_reassign.throttle.record import FileRecordStore
admin = KafkaAdmin(bootstrap_servers=sys.argv[1].split(","))
run_reassignment(admin, json.loads(sys.argv[2]), json.loads(sys.argv[3]), FileRecordStore(sys.argv[4]),
                 run_id="killed")
"""


def worker_killed_mid_run(env: Env) -> None:
    """The process running the reassignment is SIGKILLed mid-move; a new run of the plan resumes."""
    d = env.outcome.details
    import json

    plan = plan_of(("orders", 0, [4, 2, 3]), ("orders", 1, [5, 3, 4]))
    params = {**FAST, "throttle_bytes_per_sec": 5_000_000, "max_partition_movements": 1}
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, env.bootstrap, json.dumps(plan), json.dumps(params),
                             str(env.record_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env.outcome.runs += 1
    deadline = time.monotonic() + 60
    while not env.admin.list_partition_reassignments():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the run never started a move")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    env.fault(1)
    d["throttle_after_kill"] = {k: v for k, v in env.throttles().items() if env.others.get(k) != v}
    d["reconcile_in_flight"] = env.reconcile()
    d["resumed"] = _run(env, plan, params, "resumed")


def two_concurrent_runs(env: Env) -> None:
    """A second run starts while the first one's moves are in flight: refused, nothing written."""
    from kafka_reassign.errors import PlanValidationError

    d = env.outcome.details
    first: dict[str, Any] = {}
    t = threading.Thread(target=lambda: first.setdefault("result", _run(
        env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 5_000_000}, "first")))
    t.start()
    deadline = time.monotonic() + 60
    while not env.admin.list_partition_reassignments():
        assert time.monotonic() < deadline, "the first run never started"
        time.sleep(0.05)
    env.fault(1)
    writes = env.cluster.write_count
    try:
        _run(env, plan_of(("orders", 3, [1, 5, 6])), {"throttle_bytes_per_sec": 5_000_000}, "second")
    except PlanValidationError as exc:
        d["error"] = exc
    d["writes_by_second"] = env.cluster.write_count - writes
    t.join(120)
    d["first"] = first.get("result")


def noop_plan(env: Env) -> None:
    """A plan already in place, and a re-run of a finished plan: success, nothing to move, no write."""
    d = env.outcome.details
    writes = env.cluster.write_count
    d["noop"] = _run(env, plan_of(("orders", 0, [1, 2, 3]), ("orders", 1, [2, 3, 4])), {}, "noop")
    d["noop_writes"] = env.cluster.write_count - writes
    plan = plan_of(("orders", 0, [4, 2, 3]))
    _run(env, plan, {"throttle_bytes_per_sec": 50_000_000}, "first-run")
    writes = env.cluster.write_count
    d["rerun"] = _run(env, plan, {"throttle_bytes_per_sec": 50_000_000}, "re-run")
    d["rerun_writes"] = env.cluster.write_count - writes
    env.fault(0)


def stale_plan(env: Env) -> None:
    """The plan was made from an old snapshot: orders-1 moved since. Refused before any write."""
    from kafka_reassign.errors import PlanValidationError

    d = env.outcome.details
    plan = plan_of(("orders", 0, [4, 2, 3]), ("orders", 1, [5, 3, 4]), original=True, cluster=env.cluster)
    # Someone moves orders-1 after the snapshot the plan was made from.
    env.admin.alter_partition_reassignments({("orders", 1): [2, 3, 6]})
    env.wait_idle()
    env.fault(1)
    writes = env.cluster.write_count
    try:
        _run(env, plan, {}, "stale")
    except PlanValidationError as exc:
        d["error"] = exc
    d["writes_by_us"] = env.cluster.write_count - writes


def _timeout_run(env: Env, cancel: bool) -> None:
    """The move times out (throttle far too low for the time allowed)."""
    from kafka_reassign.run.reassign import RunFailed

    d = env.outcome.details
    d["replicas_before"] = env.cluster.partition_state("orders", 0)["replicas"]
    try:
        _run(env, plan_of(("orders", 0, [4, 2, 3])),
             {"throttle_bytes_per_sec": 4_000_000, "batch_timeout_minutes": 0.03, "cancel_on_failure": cancel},
             f"timeout-cancel-{cancel}")
    except RunFailed as exc:  # outcome timed_out
        d["error"] = exc
    env.fault(1)
    d["in_flight_after"] = env.admin.list_partition_reassignments()
    d["throttle_after"] = {k: v for k, v in env.throttles().items() if env.others.get(k) != v}
    d["record"] = env.store.get(f"timeout-cancel-{cancel}")
    if not cancel:
        d["reconcile_in_flight"] = env.reconcile()


def cancel_on_failure_on(env: Env) -> None:
    _timeout_run(env, True)
    d = env.outcome.details
    d["replicas_after"] = env.cluster.partition_state("orders", 0)["replicas"]


def cancel_on_failure_off(env: Env) -> None:
    _timeout_run(env, False)


SCENARIOS: dict[str, Callable[[Env], None]] = {
    "broker dead at teardown": broker_dead_at_teardown,
    "broker restart mid-move": broker_restart_mid_move,
    "throttle deleted or changed mid-run": throttle_deleted_mid_run,
    "others' throttle changes mid-run": others_throttle_changes_mid_run,
    "others' in-flight reassignment": others_in_flight,
    "Kafka unreachable at teardown (short)": kafka_unreachable_short,
    "Kafka unreachable at teardown (long)": kafka_unreachable_long,
    "worker killed mid-run": worker_killed_mid_run,
    "two concurrent runs": two_concurrent_runs,
    "no-op plan": noop_plan,
    "stale plan": stale_plan,
    "cancel_on_failure on": cancel_on_failure_on,
    "cancel_on_failure off": cancel_on_failure_off,
}


def run_scenario(name: str, workdir: Path | None = None) -> Outcome:
    """Run one row of the matrix on a fresh cluster and score it."""
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="faults-")
        workdir = Path(tmp.name)
    env = Env(workdir)
    env.outcome.name = name
    try:
        SCENARIOS[name](env)
        return env.finish()
    finally:
        env.close()
        if tmp is not None:
            tmp.cleanup()


def main() -> int:
    import logging

    logging.disable(logging.CRITICAL)  # the figures, not the runs' logs
    outcomes = []
    for name in SCENARIOS:
        try:
            out = run_scenario(name)
        except Exception as exc:  # noqa: BLE001 - a crashed scenario is a failed benchmark
            print(f"  {name:40s} CRASHED: {type(exc).__name__}: {exc}")
            return 1
        outcomes.append(out)
        print(f"  {name:40s} faults {out.faults}  runs {out.runs}  leftovers {len(out.leftovers)}  "
              f"foreign changes {len(out.foreign)}")
        for line in out.leftovers + out.foreign:
            print(f"      {line}")
    faults = sum(o.faults for o in outcomes)
    runs = sum(o.runs for o in outcomes)
    left = sum(len(o.leftovers) for o in outcomes)
    foreign = sum(len(o.foreign) for o in outcomes)
    print(f"fault matrix: {len(outcomes)} scenarios, {faults} faults injected, {runs} runs; after the reconciler: "
          f"throttle leftovers {left} (goal 0), foreign changes {foreign} (goal 0)")
    return 0 if left == 0 and foreign == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
