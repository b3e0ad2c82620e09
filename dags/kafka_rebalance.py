"""kafka_rebalance: daily, plan a rebalance on Spark and carry it out when the cluster needs it.

Wiring only: planning is ``kafka_reassign.planner``, the reassignment tasks are the very same
ones ``kafka_reassign`` runs (``kafka_reassign_airflow.operators.workflow.reassignment_tasks``:
prepare -> throttle_set -> batches -> cancel_on_failure -> throttle_remove -> report).
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param, TriggerRule, task

from kafka_reassign_airflow.operators.workflow import reassignment_tasks
from kafka_reassign_airflow.params import reassign_params

PLAN_TASK_ID = "plan_rebalance"

DOC_MD = """
# kafka_rebalance — scheduled rebalance (daily)

1. **plan_rebalance** reads the cluster (brokers, racks, log dirs, partition sizes) and plans
   the `rebalance` goal on Spark (the `spark_conn_id` connection's master; `local[2]` when the
   connection does not exist): even disk use relative to capacity, replica and leader counts,
   keeping rack spread and moving as little data as possible.
2. **should_rebalance** stops the run *quietly* (every later task skipped, run = success) when
   the disk balance (fullest broker's utilisation / mean utilisation, 1.0 = perfect) is at or
   under `balance_threshold`, or when the plan moves nothing.
3. With `require_approval` on, **approve_plan** waits for a person to press *Approve* or
   *Reject* in the Airflow UI (Required actions); the body shows the plan summary. Reject
   skips the reassignment; no answer within 12 hours counts as Reject.
4. Then the same tasks as `kafka_reassign`: throttle, batches, sensor, teardown — one
   implementation for both DAGs. Every throttle/batch param of `kafka_reassign` applies.

The DAG is created paused (it moves data): unpause it when the params suit the cluster.
"""


#: Params of this DAG only (the reassignment tasks must not receive them as run options).
REBALANCE_ONLY = ("balance_threshold", "require_approval", "spark_conn_id", "planner_engine", "planner_options")
#: kafka_reassign params that do not apply: the plan comes from the planner.
NOT_APPLICABLE = ("plan", "goal", "brokers", "replication_factor", "allow_replication_factor_change")


def _params() -> dict[str, Param]:
    params = reassign_params()
    for name in NOT_APPLICABLE:
        params.pop(name, None)
    params.update({
        "balance_threshold": Param(
            1.10, type="number", minimum=1.0, title="Balance threshold",
            description="Act only when the fullest broker's disk utilisation is more than this times the "
                        "mean (1.10 = 10% above the mean). At or under it the run stops quietly.",
            section="When to act"),
        "require_approval": Param(
            False, type="boolean", title="Require approval",
            description="Wait for a person to approve the plan in the Airflow UI before moving anything.",
            section="When to act"),
        "spark_conn_id": Param(
            "spark_default", type="string", minLength=1, title="Spark connection",
            description="Spark master for the planner (conn_type spark, e.g. host spark://spark-master, "
                        "port 7077). When the connection does not exist the planner runs local[2].",
            section="Planner"),
        "planner_engine": Param(
            "spark", type="string", enum=["spark", "local"], title="Planner engine",
            description="spark (default) computes the loads on Spark; local does the same in plain Python "
                        "(small clusters, no JVM).",
            section="Planner"),
        "planner_options": Param(
            {}, type="object", title="Planner options",
            description="More options of the rebalance goal, e.g. {\"capacity_ceiling\": 0.85, "
                        "\"balance_tolerance\": 0.04, \"exclude_topics\": [\"audit\"], \"exclude_brokers\": [7]}.",
            section="Planner"),
    })
    return params


with DAG(
    dag_id="kafka_rebalance",
    description="Daily: plan a rebalance on Spark; act through kafka_reassign's tasks when over the threshold",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    params=_params(),
    doc_md=DOC_MD,
    tags=["kafka", "reassignment", "rebalance"],
    default_args={"owner": "kafka-ops", "retries": 0},
) as dag:

    @task(task_id=PLAN_TASK_ID)
    def plan_rebalance(params: dict[str, Any]) -> dict[str, Any]:
        """Snapshot the cluster and plan the rebalance goal; returns {"plan", "summary"}."""
        from kafka_reassign.planner import plan
        from kafka_reassign.snapshot import read_cluster_snapshot
        from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook

        admin = KafkaAdminHook(kafka_config_id=params["kafka_conn_id"]).get_admin()
        try:
            snapshot = read_cluster_snapshot(admin)
        finally:
            admin.close()
        options = dict(params.get("planner_options") or {})
        options.setdefault("engine", params["planner_engine"])
        if options["engine"] == "spark":
            options.setdefault("spark_master", _spark_master(params["spark_conn_id"]))
        for name in ("throttle_bytes_per_sec", "max_partition_movements", "max_movements_per_broker",
                     "max_leader_movements"):
            if params.get(name) is not None:
                options.setdefault(name, params[name])
        result = plan(snapshot, "rebalance", **options)
        out = {"plan": result.plan.to_json(), "summary": result.summary}
        print("Rebalance plan summary:", {k: v for k, v in result.summary.items() if not isinstance(v, (list, dict))})
        return out

    def _spark_master(conn_id: str) -> str:
        """spark://host:port from the Spark connection; local[2] when it does not exist."""
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowRuntimeError

        try:
            conn = BaseHook.get_connection(conn_id)
        except (AirflowRuntimeError, Exception):  # missing connection: plan in-process
            print(f"Spark connection {conn_id!r} not found: planning with local[2]")
            return "local[2]"
        host = (conn.host or "").strip()
        if not host or host.startswith("local"):
            return host or "local[2]"
        if "://" not in host:
            host = f"spark://{host}"
        return f"{host}:{conn.port}" if conn.port else host

    @task.short_circuit(task_id="should_rebalance")
    def should_rebalance(result: dict[str, Any], params: dict[str, Any]) -> bool:
        """Go on only when the cluster is over the threshold and the plan moves something."""
        summary = result["summary"]
        moves = len(result["plan"].get("partitions", []))
        before = summary.get("balance_before")
        threshold = float(params["balance_threshold"])
        if moves == 0:
            print(f"Nothing to move (balance {before}); stopping quietly.")
            return False
        if before is not None and float(before) <= threshold:
            print(f"Disk balance {float(before):.3f} <= threshold {threshold:.3f}: within bounds, "
                  f"not moving anything ({moves} partition move(s) were possible).")
            return False
        print(f"Disk balance {before} > threshold {threshold}: rebalancing {moves} partition(s), "
              f"{summary.get('data_to_move_bytes')} bytes, balance after {summary.get('balance_after')}.")
        return True

    @task.branch(task_id="approval_gate")
    def approval_gate(params: dict[str, Any]) -> str:
        return "approve_plan" if params["require_approval"] else "approval_not_required"

    planned = plan_rebalance()
    go = should_rebalance(planned)
    gate = approval_gate()
    approve = ApprovalOperator(
        task_id="approve_plan",
        subject="Kafka rebalance of {{ params.kafka_conn_id }}: approve the plan?",
        body=("Disk balance {{ ti.xcom_pull(task_ids='plan_rebalance')['summary']['balance_before'] }} -> "
              "{{ ti.xcom_pull(task_ids='plan_rebalance')['summary']['balance_after'] }}; "
              "{{ ti.xcom_pull(task_ids='plan_rebalance')['summary']['replica_movements'] }} replica movement(s), "
              "{{ ti.xcom_pull(task_ids='plan_rebalance')['summary']['data_to_move_bytes'] }} bytes to copy, "
              "estimated {{ ti.xcom_pull(task_ids='plan_rebalance')['summary']['estimated_seconds'] }} s. "
              "The plan is in the XCom of plan_rebalance."),
        defaults="Reject",
        response_timeout=timedelta(hours=12),
        ignore_downstream_trigger_rules=True,
    )
    no_approval = EmptyOperator(task_id="approval_not_required")

    tasks = reassignment_tasks(plan="{{ ti.xcom_pull(task_ids='%s')['plan'] }}" % PLAN_TASK_ID,
                               goal=None, brokers=None, replication_factor=None)
    # One of the two gate branches is skipped by design.
    tasks.prepare.trigger_rule = TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS
    # The run options are kafka_reassign's params; this DAG's own params are not among them.
    tasks.prepare.options = {name: "{{ params.%s }}" % name for name in dag.params
                             if name not in REBALANCE_ONLY}

    planned >> go >> gate >> [approve, no_approval]
    [approve, no_approval] >> tasks.prepare
