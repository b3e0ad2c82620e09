"""Promises to operators, checked under the real scheduler, triggerer and REST API.

The session's shared Airflow stack (api-server + scheduler + dag-processor + triggerer as
subprocesses, see ``conftest.py`` and ``airflow_stack.py``) serves every test of this module,
with a poke-mode DAG file added; each test gets its own simulated
cluster, reached through its own Airflow connection created over the REST API (so the task
and trigger processes look it up in the metadata DB, as in production).

1. A ``kafka_reassign`` run marked failed by hand (``PATCH .../dagRuns/{id} {"state": "failed"}``)
   while its batch is in flight in the triggerer: the ``throttle_remove`` teardown still runs,
   cancels the in-flight move (``cancel_on_failure``, on by default) and puts every throttle
   config back exactly - including the ones an operator had set before the run. The run
   stays failed: `report`, a teardown too, still runs and fails on the reverted placement.
2. The batch sensor: deferred into the triggerer by default (the wait task is seen in state
   ``deferred``, the triggerer writes the trigger's progress to its log); with
   ``reassignment_tasks(deferrable=False)`` it pokes in the worker and the run still succeeds.
3. ``kafka_rebalance`` with ``require_approval``: the ApprovalOperator waits for a person; the
   answer goes through the HITL REST endpoint
   (``PATCH .../taskInstances/approve_plan/-1/hitlDetails``). Approve -> the rebalance is carried
   out; Reject -> the run ends without a single write to the cluster.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from airflow_stack import AirflowApiError, AirflowStack

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(1500)]

RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second")
LIST_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

#: poll_interval_seconds of the runs below: the execute task's trigger polls this often, and
#: its first poll comes one interval after the task deferred.
POLL_SECONDS = 2

POKE_DAG_ID = "kafka_reassign_poke"
POKE_DAG = f'''"""kafka_reassign's tasks with the execute task waiting in the worker (test DAG)."""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from kafka_reassign_airflow.operators.workflow import reassignment_tasks
from kafka_reassign_airflow.params import reassign_params

with DAG(dag_id="{POKE_DAG_ID}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         max_active_runs=1, render_template_as_native_obj=True, params=reassign_params(),
         default_args={{"owner": "kafka-ops", "retries": 0}}) as dag:
    reassignment_tasks(deferrable=False)
'''


# -- helpers -------------------------------------------------------------------------------
def _q(s: str) -> str:
    return quote(s, safe="")


def start_cluster(snapshot: dict, time_scale: float = 1.0) -> Any:
    from kafka_sim import SimulatedCluster

    cluster = SimulatedCluster(snapshot, time_scale=time_scale)
    cluster.start()
    return cluster


def broker_configs(cluster: Any) -> dict[int, dict[str, str]]:
    return {b["id"]: dict(cluster.broker_configs(b["id"])) for b in cluster.snapshot()["brokers"]}


def topic_configs(cluster: Any) -> dict[str, dict[str, str]]:
    return {t["name"]: dict(cluster.topic_configs(t["name"])) for t in cluster.snapshot()["topics"]}


def replica_counts(cluster: Any) -> dict[int, int]:
    snap = cluster.snapshot()
    counts = {b["id"]: 0 for b in snap["brokers"]}
    for t in snap["topics"]:
        for p in t["partitions"]:
            for r in p["replicas"]:
                counts[r] += 1
    return counts


def ti_states(stack: AirflowStack, dag_id: str, run_id: str) -> dict[str, str | None]:
    out = {}
    for ti in stack.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances?limit=100")[
            "task_instances"]:
        key = ti["task_id"] + (f"[{ti['map_index']}]" if ti.get("map_index", -1) >= 0 else "")
        out[key] = ti["state"]
    return out


def task_log(stack: AirflowStack, dag_id: str, run_id: str, task_id: str, map_index: int = -1,
             try_number: int | None = None) -> str:
    """The task instance's log as the UI shows it (worker part and, for deferred tasks, triggerer
    part): of one try, or of every try so far (a retried execute resumes in its next try)."""
    if try_number is None:
        ti = stack.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}"
                                  + (f"/{map_index}" if map_index >= 0 else ""))
        return "\n".join(task_log(stack, dag_id, run_id, task_id, map_index, n)
                         for n in range(1, max(1, int(ti.get("try_number") or 1)) + 1))
    out = stack.request(
        "GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/logs/{try_number}"
               f"?map_index={map_index}&full_content=true")
    content = out.get("content") if isinstance(out, dict) else out
    if isinstance(content, list):
        return "\n".join(json.dumps(x) if not isinstance(x, str) else x for x in content)
    return str(content)


def trigger_log(stack: AirflowStack, dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """What the triggerer wrote for this task instance's triggers ("" when none ran)."""
    folder = stack.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
    if map_index >= 0:  # Airflow's log path names the map index of mapped tasks only
        folder = folder / f"map_index={map_index}"
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*.log.trigger.*.log")))


def failure_detail(stack: AirflowStack, dag_id: str, run_id: str, states: dict[str, str]) -> str:
    """Why a run failed: its task states, then the logs of the tasks that failed (first, where a
    truncated CI report still shows them), then every component's log tail."""
    parts = [str(states)]
    for task_id, state in states.items():
        if state == "failed":
            parts.append(f"--- {task_id}'s log ---\n{task_log(stack, dag_id, run_id, task_id)[-5000:]}")
            trig = trigger_log(stack, dag_id, run_id, task_id, -1)
            if trig:
                parts.append(f"--- {task_id}'s trigger ---\n{trig[-3000:]}")
    return "\n".join(parts + [stack.diagnostics()])


def wait_run(stack: AirflowStack, dag_id: str, run_id: str, timeout: float) -> dict[str, Any]:
    """wait_for_run, with run ids quoted in the path."""

    def finished() -> dict[str, Any] | None:
        run = stack.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}")
        return run if run["state"] in ("success", "failed") else None

    return stack.wait_for(finished, timeout, f"run {run_id} of {dag_id} to finish", interval=1.0)


def wait_idle(stack: AirflowStack, dag_id: str, timeout: float = 240.0) -> None:
    """Wait until no run of ``dag_id`` is queued or running (the scheduled run unpausing created)."""

    def idle() -> bool:
        runs = stack.request("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
        return all(r["state"] in ("success", "failed") for r in runs)

    stack.wait_for(idle, timeout, f"no active run of {dag_id}", interval=1.0)


# -- the shared stack -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stack(shared_stack: AirflowStack) -> AirflowStack:
    """The session's shared stack (conftest.py), with the poke-mode DAG of this module added."""
    (shared_stack.dags_folder / f"{POKE_DAG_ID}.py").write_text(POKE_DAG)
    for dag_id in ("kafka_reassign", POKE_DAG_ID, "kafka_rebalance"):
        shared_stack.wait_for_dag(dag_id)
    return shared_stack


# -- 1. marked failed by hand while a batch is in flight ----------------------------------------
#: what the marked-failed run ended as (checked by the next test)
MARKED_FAILED: dict[str, str] = {}


def test_marked_failed_by_hand_still_restores_throttle_and_reverts(stack: AirflowStack,
                                                                    snapshot_factory: Any) -> None:
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.specs import ConfigChange

    # 400 MB partitions under a 1 MB/s throttle: the move takes minutes, so it is in flight
    # when the run is marked failed.
    cluster = start_cluster(snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 400_000_000, "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 2, "rf": 2, "size_bytes": 5_000_000}}))
    try:
        stack.put_connection("kafka_failmark", cluster.bootstrap_servers)
        # The operator's own throttles, set before the run: broker 4's follower rate higher than
        # ours (the run overwrites it, the teardown must put it back), broker 2's leader rate
        # lower (kept), and a replica list on orders the run merges its entries into.
        admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers.split(","))
        try:
            admin.alter_configs([
                ConfigChange("broker", "4", "follower.replication.throttled.rate", None, "90000000"),
                ConfigChange("broker", "2", "leader.replication.throttled.rate", None, "500000"),
                ConfigChange("topic", "orders", "leader.replication.throttled.replicas", None, "2:1"),
            ])
        finally:
            admin.close()
        brokers_before, topics_before = broker_configs(cluster), topic_configs(cluster)
        assert brokers_before[4]["follower.replication.throttled.rate"] == "90000000"
        assert topics_before["orders"]["leader.replication.throttled.replicas"] == "2:1"
        original = cluster.partition_state("orders", 0)["replicas"]
        assert original == [1, 2, 3]

        run_id = f"failmark-{int(time.time())}"
        plan = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 2, 3]}]}
        stack.trigger("kafka_reassign", {
            "plan": plan, "kafka_conn_id": "kafka_failmark", "throttle_bytes_per_sec": 1_000_000,
            "max_partition_movements": 10, "poll_interval_seconds": 1, "batch_timeout_minutes": 30,
            "stall_window_minutes": 30, "cancel_on_failure": True}, run_id=run_id)

        def deferred_and_moving() -> bool:
            states = ti_states(stack, "kafka_reassign", run_id)
            if states.get("prepare") == "failed" or states.get("throttle_set") == "failed":
                raise AssertionError(f"run failed early: {states}\n{stack.diagnostics()}")
            st = cluster.partition_state("orders", 0)
            return states.get("execute") == "deferred" and bool(st["adding"])

        stack.wait_for(deferred_and_moving, 240, "execute deferred with orders-0 moving")
        # Let the trigger poll a few times in the triggerer, so its progress reaches the log.
        time.sleep(4)
        during = broker_configs(cluster)
        assert during[4]["follower.replication.throttled.rate"] == "1000000", during
        assert during[2]["leader.replication.throttled.rate"] == "500000", during  # lower one kept
        assert cluster.partition_state("orders", 0)["adding"] == [4]
        writes_before_fail = cluster.write_count

        marked = stack.request("PATCH", f"/api/v2/dags/kafka_reassign/dagRuns/{_q(run_id)}", {"state": "failed"})
        print(f"PATCH state=failed answered run state {marked['state']!r}")
        final = wait_run(stack, "kafka_reassign", run_id, timeout=240)
        states = ti_states(stack, "kafka_reassign", run_id)
        print(f"run marked failed ended {final['state']}; tasks: {states}")
        diag = f"{json.dumps(states, indent=1)}\n{stack.diagnostics()}"

        assert states["execute"] == "failed", diag
        assert states["throttle_remove"] == "success", diag
        assert cluster.write_count > writes_before_fail, "the teardown wrote nothing"

        # Every throttle config exactly as before the run: the operator's values are back, ours gone.
        assert broker_configs(cluster) == brokers_before, diag
        assert topic_configs(cluster) == topics_before, diag
        for b, cfg in broker_configs(cluster).items():
            for key in RATE_KEYS:
                assert cfg.get(key) != "1000000", (b, key, cfg)
        assert "follower.replication.throttled.replicas" not in topic_configs(cluster)["orders"]

        # cancel_on_failure (on): the in-flight move was reverted, original order included.
        st = cluster.partition_state("orders", 0)
        assert not st["adding"] and not st["removing"], st
        assert st["replicas"] == original, st
        assert sorted(st["isr"]) == sorted(original), st

        log = task_log(stack, "kafka_reassign", run_id, "throttle_remove")
        assert "cancelling them" in log and "Throttle restored" in log, log[-4000:]

        # The durable record is marked restored; the cluster lock is released.
        record = stack.request("GET", f"/api/v2/variables/{_q('kafka_reassign.throttle.' + run_id)}")
        assert json.loads(record["value"])["restored"] is True, record
        lock_keys = [v["key"] for v in stack.request("GET", "/api/v2/variables?limit=100")["variables"]
                     if v["key"].startswith("kafka_reassign.lock.")]
        for key in lock_keys:
            value = json.loads(stack.request("GET", f"/api/v2/variables/{_q(key)}")["value"])
            assert value.get("run_id") != run_id, (key, value)

        MARKED_FAILED["final_state"] = final["state"]
    finally:
        cluster.stop()


def test_run_marked_failed_by_hand_stays_failed(stack: AirflowStack) -> None:
    """The operator said failed: the teardown's success must not turn the run green."""
    if "final_state" not in MARKED_FAILED:
        pytest.skip("test_marked_failed_by_hand_still_restores_throttle_and_reverts did not get that far")
    assert MARKED_FAILED["final_state"] == "failed"


# -- 2. deferrable (triggerer) and poke mode (worker) -------------------------------------------
def _two_move_plan() -> dict[str, Any]:
    return {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3]},
        {"topic": "orders", "partition": 1, "replicas": [1, 3, 4]}]}


def test_wait_runs_in_the_triggerer_when_deferrable(stack: AirflowStack, snapshot_factory: Any) -> None:
    # Moves estimated at 70 s (140 MB at 2 MB/s): due later than the 30 s a task stays in its
    # worker for. The simulated cluster runs 4x faster than the wall clock, so each takes 17.5 s.
    cluster = start_cluster(snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 140_000_000, "configs": {"min.insync.replicas": "2"}}}),
        time_scale=4.0)
    try:
        stack.put_connection("kafka_deferred", cluster.bootstrap_servers)
        run_id = f"deferred-{int(time.time())}"
        stack.trigger("kafka_reassign", {
            "plan": _two_move_plan(), "kafka_conn_id": "kafka_deferred", "throttle_bytes_per_sec": 2_000_000,
            "max_partition_movements": 1, "poll_interval_seconds": POLL_SECONDS, "batch_timeout_minutes": 10}, run_id=run_id)
        seen: set[str] = set()

        def wait_states() -> bool:
            states = ti_states(stack, "kafka_reassign", run_id)
            seen.update(f"{k}={v}" for k, v in states.items() if k == "execute")
            return states.get("report") in ("success", "failed", "upstream_failed", "skipped")

        stack.wait_for(wait_states, 300, "the deferrable run to finish", interval=0.5)
        final = wait_run(stack, "kafka_reassign", run_id, timeout=60)
        states = ti_states(stack, "kafka_reassign", run_id)
        assert final["state"] == "success", failure_detail(stack, "kafka_reassign", run_id, states)
        assert "execute=deferred" in seen, seen
        # Worker part (REST API log): execute deferred, then resumed on the trigger's events and
        # refilled the window; one task instance for both moves.
        log = task_log(stack, "kafka_reassign", run_id, "execute", map_index=-1)
        assert "Pausing task as DEFERRED" in log and "Every step is done" in log, log[-4000:]
        # Triggerer part (the file the triggerer process wrote): it polled the steps in flight
        # through its own admin client and fired the event. (The hook's connection line is at
        # DEBUG since task logs were made quiet.)
        trig = trigger_log(stack, "kafka_reassign", run_id, "execute", -1)
        assert "step(s) in flight" in trig and "Trigger fired event" in trig, trig[-3000:]
        assert cluster.partition_state("orders", 0)["replicas"] == [4, 2, 3]
        assert cluster.partition_state("orders", 1)["replicas"] == [1, 3, 4]
    finally:
        cluster.stop()


def test_wait_pokes_in_the_worker_when_not_deferrable(stack: AirflowStack, snapshot_factory: Any) -> None:
    cluster = start_cluster(snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 40_000_000, "configs": {"min.insync.replicas": "2"}}}))
    try:
        stack.put_connection("kafka_poke", cluster.bootstrap_servers)
        throttles_before = broker_configs(cluster)
        run_id = f"poke-{int(time.time())}"
        stack.trigger(POKE_DAG_ID, {
            "plan": _two_move_plan(), "kafka_conn_id": "kafka_poke", "throttle_bytes_per_sec": 10_000_000,
            "max_partition_movements": 1, "poll_interval_seconds": POLL_SECONDS, "batch_timeout_minutes": 10}, run_id=run_id)
        seen: set[str] = set()

        def done() -> bool:
            states = ti_states(stack, POKE_DAG_ID, run_id)
            seen.update(f"{k}={v}" for k, v in states.items() if k == "execute")
            return states.get("report") in ("success", "failed", "upstream_failed", "skipped")

        stack.wait_for(done, 300, "the poke-mode run to finish", interval=0.5)
        final = wait_run(stack, POKE_DAG_ID, run_id, timeout=60)
        states = ti_states(stack, POKE_DAG_ID, run_id)
        assert final["state"] == "success", failure_detail(stack, POKE_DAG_ID, run_id, states)
        assert not any(s.endswith("=deferred") for s in seen), seen
        log = task_log(stack, POKE_DAG_ID, run_id, "execute", map_index=-1)
        assert "DEFERRED" not in log and "Every step is done" in log, log[-4000:]
        assert cluster.partition_state("orders", 0)["replicas"] == [4, 2, 3]
        assert cluster.partition_state("orders", 1)["replicas"] == [1, 3, 4]
        assert broker_configs(cluster) == throttles_before
        assert trigger_log(stack, POKE_DAG_ID, run_id, "execute", -1) == "", "a trigger ran in poke mode"
    finally:
        cluster.stop()


# -- 3. kafka_rebalance with a person approving or rejecting -----------------------------------
def _skewed(snapshot_factory: Any) -> dict:
    # Everything on brokers 1-3; broker 4 (rack-1) holds nothing, like a freshly added broker.
    replicas = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3], [2, 3, 1], [3, 1, 2]]
    return snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 6, "rf": 3, "size_bytes": 10_000_000, "replicas": replicas,
                   "configs": {"min.insync.replicas": "2"}}})


def _rebalance_conf(conn_id: str) -> dict[str, Any]:
    return {"kafka_conn_id": conn_id, "require_approval": True, "planner_engine": "local",
            "throttle_bytes_per_sec": 100_000_000, "poll_interval_seconds": POLL_SECONDS,
            "batch_timeout_minutes": 10,
            "max_partition_movements": 4, "balance_threshold": 1.10}


def _answer_approval(stack: AirflowStack, run_id: str, choice: str) -> dict[str, Any]:
    """Wait for approve_plan to ask, check what it shows, answer ``choice`` over the REST API."""
    base = f"/api/v2/dags/kafka_rebalance/dagRuns/{_q(run_id)}"

    def asking() -> dict[str, Any] | None:
        states = ti_states(stack, "kafka_rebalance", run_id)
        bad = {k: v for k, v in states.items() if v in ("failed", "upstream_failed")}
        if bad or states.get("approve_plan") == "skipped":
            raise AssertionError(f"run went wrong before the approval: {states}\n{stack.diagnostics()}")
        if states.get("approve_plan") not in ("awaiting_input", "deferred"):
            return None
        try:
            return stack.request("GET", f"{base}/taskInstances/approve_plan/-1/hitlDetails")
        except AirflowApiError as err:
            if err.status == 404:
                return None
            raise

    detail = stack.wait_for(asking, 300, "approve_plan to wait for an answer", interval=1.0)
    # Airflow 3.3.2 race: answering before the scheduler has processed the executor's "success"
    # event of the worker that parked the task lets the scheduler queue the resumed task first and
    # then fail it on that stale event ("... finished with state success, but the task instance's
    # state attribute is queued"). A person never answers within a second; wait for the event.
    event = (f"Received executor event with state success for task instance TaskInstanceKey("
             f"dag_id='kafka_rebalance', task_id='approve_plan', run_id='{run_id}'")
    stack.wait_for(lambda: event in (stack.home / "scheduler.log").read_text(errors="replace"), 60,
                   "the scheduler to see approve_plan's worker exit", interval=0.5)
    assert detail["options"] == ["Approve", "Reject"], detail
    assert "approve the plan" in detail["subject"], detail
    assert "Disk balance" in (detail.get("body") or ""), detail
    assert not detail.get("response_received"), detail
    listed = stack.request("GET", f"{base}/hitlDetails")
    assert any(d["task_instance"]["task_id"] == "approve_plan" for d in listed["hitl_details"]), listed
    answer = stack.request("PATCH", f"{base}/taskInstances/approve_plan/-1/hitlDetails",
                           {"chosen_options": [choice], "params_input": {}})
    assert answer["chosen_options"] == [choice], answer
    # A second answer is refused (the first one stands).
    with pytest.raises(AirflowApiError) as err:
        stack.request("PATCH", f"{base}/taskInstances/approve_plan/-1/hitlDetails",
                      {"chosen_options": ["Reject" if choice == "Approve" else "Approve"]})
    assert err.value.status == 409
    return detail


def test_rebalance_approved_over_rest_is_carried_out(stack: AirflowStack, snapshot_factory: Any) -> None:
    cluster = start_cluster(_skewed(snapshot_factory))
    try:
        stack.put_connection("kafka_approve", cluster.bootstrap_servers)
        wait_idle(stack, "kafka_rebalance")
        before = replica_counts(cluster)
        assert before[4] == 0
        configs_before = broker_configs(cluster), topic_configs(cluster)
        run_id = f"approve-{int(time.time())}"
        stack.trigger("kafka_rebalance", _rebalance_conf("kafka_approve"), run_id=run_id)
        _answer_approval(stack, run_id, "Approve")
        assert cluster.write_count == 0, "wrote to the cluster before the approval"
        final = wait_run(stack, "kafka_rebalance", run_id, timeout=400)
        states = ti_states(stack, "kafka_rebalance", run_id)
        assert final["state"] == "success", failure_detail(stack, "kafka_rebalance", run_id, states)
        print(f"approved rebalance: {states}")
        assert states["approve_plan"] == "success" and states["approval_not_required"] == "skipped"
        # The one planning path: snapshot, then the planner job (engine local: in the worker).
        assert states["snapshot"] == "success" and states["plan"] == "success", states
        plans = list((stack.home / "kafka_reassign" / "kafka_rebalance").glob("approve-*/PLAN.json"))
        assert len(plans) == 1 and (plans[0].parent / "PLAN.summary.json").is_file(), plans
        for t in ("prepare", "throttle_set", "throttle_remove", "report"):
            assert states[t] == "success", states
        assert states["execute"] == "success", states
        after = replica_counts(cluster)
        print(f"replicas per broker before {before} after {after}; writes {dict(cluster.writes)}")
        assert after[4] >= 3, after
        assert sum(after.values()) == sum(before.values())
        assert cluster.writes.get("AlterPartitionReassignments", 0) > 0 or cluster.write_count > 0
        for t in cluster.snapshot()["topics"]:
            for p in t["partitions"]:
                st = cluster.partition_state(t["name"], p["partition"])
                assert sorted(st["isr"]) == sorted(st["replicas"]) and not st["adding"], st
        assert (broker_configs(cluster), topic_configs(cluster)) == configs_before
    finally:
        cluster.stop()


def test_rebalance_rejected_over_rest_writes_nothing(stack: AirflowStack, snapshot_factory: Any) -> None:
    cluster = start_cluster(_skewed(snapshot_factory))
    try:
        stack.put_connection("kafka_reject", cluster.bootstrap_servers)
        wait_idle(stack, "kafka_rebalance")
        placement = {p: cluster.partition_state("orders", p)["replicas"] for p in range(6)}
        run_id = f"reject-{int(time.time())}"
        stack.trigger("kafka_rebalance", _rebalance_conf("kafka_reject"), run_id=run_id)
        _answer_approval(stack, run_id, "Reject")
        final = wait_run(stack, "kafka_rebalance", run_id, timeout=240)
        states = ti_states(stack, "kafka_rebalance", run_id)
        print(f"rejected rebalance ended {final['state']}: {states}")
        assert final["state"] == "success", failure_detail(stack, "kafka_rebalance", run_id, states)
        assert states["plan"] == "success" and states["approve_plan"] == "success"
        for t in ("prepare", "throttle_set", "report"):
            assert states[t] == "skipped", states
        assert states["throttle_remove"] in ("skipped", "success"), states
        assert states.get("execute") in ("skipped", None), states
        assert cluster.write_count == 0, dict(cluster.writes)
        assert {p: cluster.partition_state("orders", p)["replicas"] for p in range(6)} == placement
        detail = stack.request("GET", f"/api/v2/dags/kafka_rebalance/dagRuns/{_q(run_id)}"
                                      "/taskInstances/approve_plan/-1/hitlDetails")
        assert detail["chosen_options"] == ["Reject"] and detail["response_received"], detail
    finally:
        cluster.stop()
