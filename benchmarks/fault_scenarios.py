"""The rows of the fault matrix: each injects one fault of the README's table into a run.

Each scenario gets a fresh :class:`benchmarks.fault_env.Env`, records what the tests check
in ``env.outcome.details`` and counts the faults it injected; the score is taken afterwards.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from benchmarks.fault_env import BROKERS, FAST, Env, moves_done_then, once_moving, plan_of, run_plan
from kafka_reassign.throttle.specs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS


def broker_dead_at_teardown(env: Env) -> None:
    """Broker 1 dies after the moves, before the teardown: the others are restored, 1 is pending."""
    from kafka_reassign.throttle.restore import restore_throttle

    moves_done_then(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 50_000_000}, "dead-b1")
    env.stop(1)
    res = restore_throttle(env.admin, env.store, "dead-b1", attempts=2, wait_max_seconds=0.5)
    d = env.outcome.details
    d["restore"], d["message"] = res, res.message()
    d["left_while_down"] = {k: v for k, v in env.throttles().items() if env.others.get(k) != v}
    d["reconcile_while_down"] = env.reconcile()
    d["record_after_first_reconcile"] = env.store.get("dead-b1")
    env.start(1)
    d["reconcile_after_restart"] = env.reconcile()


def broker_restart_mid_move(env: Env) -> None:
    """A receiving broker stops mid-move and comes back within the stall window: the run goes on."""
    d = env.outcome.details

    def stop_then_restart() -> None:
        env.stop(4)
        threading.Timer(1.5, lambda: (env.start(4), d.setdefault("restarted_at", time.monotonic()))).start()

    res = run_plan(env, plan_of(("orders", 0, [4, 2, 3]), ("orders", 5, [6, 4, 2])),
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

    d["result"] = run_plan(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 5_000_000},
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

    d["result"] = run_plan(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 5_000_000},
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
        run_plan(env, plan_of(("orders", 2, [6, 4, 5]), ("orders", 0, [4, 2, 3])), {}, "sees-foreign")
    except PlanValidationError as exc:
        d["error"] = exc
    d["writes_by_us"] = env.cluster.write_count - writes
    d["their_move"] = env.admin.list_partition_reassignments([("orders", 2)])
    env.wait_idle()
    d["their_result"] = env.cluster.partition_state("orders", 2)["replicas"]


def kafka_unreachable_short(env: Env) -> None:
    """Every broker is down when the teardown starts and back 1.5 s later: the restore retries through it."""
    from kafka_reassign.throttle.restore import restore_throttle

    moves_done_then(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 50_000_000}, "blip")
    env.stop(*range(1, BROKERS + 1))
    threading.Timer(1.5, lambda: env.start(*range(1, BROKERS + 1))).start()
    env.outcome.details["restore"] = restore_throttle(env.admin, env.store, "blip", attempts=5,
                                                      wait_max_seconds=2.0)


def kafka_unreachable_long(env: Env) -> None:
    """Every broker is down for the whole teardown: everything pending, named; the reconciler finishes."""
    from kafka_reassign.throttle.restore import restore_throttle

    moves_done_then(env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 50_000_000}, "outage")
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
    d["resumed"] = run_plan(env, plan, params, "resumed")


def two_concurrent_runs(env: Env) -> None:
    """A second run starts while the first one's moves are in flight: refused, nothing written."""
    from kafka_reassign.errors import PlanValidationError

    d = env.outcome.details
    first: dict[str, Any] = {}
    t = threading.Thread(target=lambda: first.setdefault("result", run_plan(
        env, plan_of(("orders", 0, [4, 2, 3])), {"throttle_bytes_per_sec": 5_000_000}, "first")))
    t.start()
    deadline = time.monotonic() + 60
    while not env.admin.list_partition_reassignments():
        assert time.monotonic() < deadline, "the first run never started"
        time.sleep(0.05)
    env.fault(1)
    writes = env.cluster.write_count
    try:
        run_plan(env, plan_of(("orders", 3, [1, 5, 6])), {"throttle_bytes_per_sec": 5_000_000}, "second")
    except PlanValidationError as exc:
        d["error"] = exc
    d["writes_by_second"] = env.cluster.write_count - writes
    t.join(120)
    d["first"] = first.get("result")


def noop_plan(env: Env) -> None:
    """A plan already in place, and a re-run of a finished plan: success, nothing to move, no write."""
    d = env.outcome.details
    writes = env.cluster.write_count
    d["noop"] = run_plan(env, plan_of(("orders", 0, [1, 2, 3]), ("orders", 1, [2, 3, 4])), {}, "noop")
    d["noop_writes"] = env.cluster.write_count - writes
    plan = plan_of(("orders", 0, [4, 2, 3]))
    run_plan(env, plan, {"throttle_bytes_per_sec": 50_000_000}, "first-run")
    writes = env.cluster.write_count
    d["rerun"] = run_plan(env, plan, {"throttle_bytes_per_sec": 50_000_000}, "re-run")
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
        run_plan(env, plan, {}, "stale")
    except PlanValidationError as exc:
        d["error"] = exc
    d["writes_by_us"] = env.cluster.write_count - writes


def _timeout_run(env: Env, cancel: bool) -> None:
    """The move times out (throttle far too low for the time allowed)."""
    from kafka_reassign.run.reassign import RunFailed

    d = env.outcome.details
    d["replicas_before"] = env.cluster.partition_state("orders", 0)["replicas"]
    try:
        run_plan(env, plan_of(("orders", 0, [4, 2, 3])),
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
