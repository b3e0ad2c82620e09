"""kafka_rebalance: daily, plan a rebalance on Spark and carry it out when the cluster needs it.

One DAG per cluster of the fleet (``kafka_rebalance__<conn_id>``, see
``kafka_reassign_airflow.fleet``), each with the schedule, threshold, throttle and approval of
its entry; without a fleet config, one DAG ``kafka_rebalance`` on ``kafka_default``. A bad
fleet config raises here, so it shows in this file's import errors naming the entry.

Wiring only: planning is the same ``snapshot >> plan`` tasks ``kafka_reassign`` runs
(``kafka_reassign_airflow.operators.workflow.planning_tasks``: the cluster snapshot, then the
Spark job through the Spark provider's SparkSubmitOperator), the reassignment tasks are the very
same ones too (``reassignment_tasks``: prepare -> throttle_set -> execute -> cancel_on_failure ->
throttle_remove -> report).
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param, TriggerRule, task

from kafka_reassign.fleet import FleetEntry
from kafka_reassign.planning.goal_order import capacities_over, resources_over
from kafka_reassign_airflow.fleet import Fleet, load_fleet, planning_pool, rebalance_dag_id
from kafka_reassign_airflow.operators.workflow import PLAN_TASK_ID, planning_tasks, reassignment_tasks
from kafka_reassign_airflow.params import dag_schedule, reassign_params
from kafka_reassign_airflow.notifications import run_notifiers

SUMMARY_XCOM_KEY = "summary"

DOC_MD = """
# kafka_rebalance — scheduled rebalance (daily)

1. **snapshot** reads the cluster (brokers, racks, log dirs, partition sizes) into the run's
   directory (`[kafka_reassign] work_dir`, default `$AIRFLOW_HOME/kafka_reassign/<dag_id>/<run_id>/`).
2. **plan** submits the planner (`kafka_reassign/planning/spark/spark_job.py`) with the Spark
   provider's SparkSubmitOperator to the `spark_conn_id` connection's master (`local[2]` when the
   connection does not exist) for the `rebalance` goal: even disk use relative to capacity,
   replica and leader counts, keeping rack spread and moving as little data as possible. It
   writes `PLAN.json`, `PLAN.summary.json` and `PLAN.chart.png` there and logs the summary line.
   `planner_engine: local` runs the same job in the worker without Spark (small clusters).
3. **should_rebalance** reads the summary file and stops the run *quietly* (every later task
   skipped, run = success) when every balanced resource (disk: fullest broker's utilisation /
   mean utilisation, 1.0 = perfect; and each other distribution goal of `balance_goals`) is at
   or under `balance_threshold`, or when the plan moves nothing.
4. With `require_approval` on, **approve_plan** waits for a person to press *Approve* or
   *Reject* in the Airflow UI (Required actions); the body shows the plan summary. Reject
   skips the reassignment; no answer within 12 hours counts as Reject.
5. Then the same tasks as `kafka_reassign`: throttle, execute (a window of moves), teardown — one
   implementation for both DAGs. Every throttle and movement-limit param of `kafka_reassign` applies.

The DAG is created paused (it moves data): unpause it when the params suit the cluster.

**A fleet** (`[kafka_reassign] fleet` or the Variable `kafka_reassign_fleet`) gets one DAG per
cluster, `kafka_rebalance__<conn_id>`: each has its own schedule, run history and pause
toggle in the UI, so "when did cluster X last rebalance, and did it act?" is one click, a
slow or failing cluster never holds up the others, and a cluster is paused on its own. The
`plan` task runs in the planning pool (`[kafka_reassign] planning_pool`), which bounds the
Spark jobs running at once across the fleet.
"""


#: Params of this DAG only (the reassignment tasks must not receive them as run options).
REBALANCE_ONLY = ("balance_threshold", "require_approval", "spark_conn_id", "planner_engine", "planner_options")
#: kafka_reassign params that do not apply: the plan comes from the planner.
NOT_APPLICABLE = ("plan", "goal", "brokers", "replication_factor", "allow_replication_factor_change",
                  "disk_threshold_percent")


def _params(entry: FleetEntry, fleet: Fleet) -> dict[str, Param]:
    """This DAG's params, with the fleet entry's overrides as defaults.

    :param entry: the cluster
    :param fleet: the fleet (in a configured fleet the connection is fixed: one DAG per cluster)
    """
    params = reassign_params()
    for name in NOT_APPLICABLE:
        params.pop(name, None)
    if fleet.configured:
        conn = params["kafka_conn_id"]
        params["kafka_conn_id"] = Param(entry.conn_id, type="string", enum=[entry.conn_id],
                                        title=conn.schema.get("title"), section=conn.schema.get("section"),
                                        description=f"This DAG rebalances {entry.conn_id} (one DAG per cluster).")
    if entry.throttle_bytes_per_sec is not None:
        params["throttle_bytes_per_sec"].value = entry.throttle_bytes_per_sec
    if entry.maintenance_windows is not None:
        params["maintenance_windows"].value = list(entry.maintenance_windows)
    if entry.balance_goals is not None:
        params["balance_goals"].value = list(entry.balance_goals)
    params.update({
        "balance_threshold": Param(
            entry.balance_threshold or 1.10, type="number", minimum=1.0, title="Balance threshold",
            description="Act only when a balanced resource (disk utilisation, and each other distribution "
                        "goal of the balance goals: network in, leader count, leader bytes in, network out) has a broker "
                        "more than this times the mean (1.10 = 10% above). At or under it the run stops quietly.",
            section="When to act"),
        "require_approval": Param(
            bool(entry.require_approval), type="boolean", title="Require approval",
            description="Wait for a person to approve the plan in the Airflow UI before moving anything.",
            section="When to act"),
        "planner_engine": Param(
            "spark", type="string", enum=["spark", "local"], title="Planner engine",
            description="spark (default) submits the planning job to the Spark connection; local runs the "
                        "same job in the worker with plain-Python aggregates (small clusters, no JVM).",
            section="Planner"),
        "planner_options": Param(
            {}, type="object", title="Planner options",
            description="More options of the rebalance goal, e.g. {\"capacity_ceiling\": 0.85, "
                        "\"balance_tolerance\": 0.04, \"exclude_topics\": [\"audit\"], \"exclude_brokers\": [7]}.",
            section="Planner"),
    })
    return params


@task.short_circuit(task_id="should_rebalance")
def should_rebalance(params: dict[str, Any], ti: Any = None) -> bool:
    """Go on only when the cluster is over the threshold and the plan moves something.

    Reads only the summary the planning job wrote (its size does not grow with the plan); its
    figures go to the XCom key ``summary`` (shown by the approval step).
    """
    planned = ti.xcom_pull(task_ids=PLAN_TASK_ID)
    summary = json.loads(Path(planned["summary_file"]).read_text(encoding="utf-8"))
    moves = int(summary.get("partitions_moved") or 0) or int(summary.get("log_dir_movements") or 0)
    ti.xcom_push(key=SUMMARY_XCOM_KEY, value={k: v for k, v in summary.items()
                                              if not isinstance(v, (list, dict))})
    before = summary.get("balance_before")
    threshold = float(params["balance_threshold"])
    if moves == 0:
        print(f"Nothing to move (balance {before}); stopping quietly.")
        return False
    # a summary of before the goal list carries the disk figure only
    balance = summary.get("balance") or {"disk": {"before": before}}
    over = resources_over(balance, summary.get("balance_goals") or ("disk",), threshold)
    over.update(capacities_over(summary))  # a broken capacity rule acts whatever the threshold
    if not over:
        print(f"Every balanced resource <= threshold {threshold:.3f} (disk {before}): within bounds, "
              f"not moving anything ({moves} partition move(s) were possible).")
        return False
    print(f"Over threshold {threshold}: {', '.join(f'{k} {v:.3f}' for k, v in over.items())}; rebalancing "
          f"{moves} partition(s), {summary.get('data_to_move_bytes')} bytes, disk balance after "
          f"{summary.get('balance_after')}.")
    return True


@task.branch(task_id="approval_gate")
def approval_gate(params: dict[str, Any]) -> str:
    return "approve_plan" if params["require_approval"] else "approval_not_required"


def _schedule(entry: FleetEntry) -> str | None:
    """The entry's own schedule, else ``[kafka_reassign] rebalance_schedule``."""
    if entry.schedule is None:
        return dag_schedule("rebalance_schedule", "@daily")
    return None if entry.schedule_off else entry.schedule


def _wire(dag: DAG) -> None:
    """The tasks of one rebalance DAG (inside its ``with``)."""
    planning = planning_tasks(plan=None, goal="rebalance", brokers=None, replication_factor=None,
                              engine="{{ params.planner_engine }}", planner_options="{{ params.planner_options }}")
    planning.plan.pool = planning_pool()  # bounds the Spark jobs running at once, fleet-wide
    go = should_rebalance()
    gate = approval_gate()
    approve = ApprovalOperator(
        task_id="approve_plan",
        subject="Kafka rebalance of {{ params.kafka_conn_id }}: approve the plan?",
        body=("{% set s = ti.xcom_pull(task_ids='should_rebalance', key='summary') %}"
              "Disk balance {{ s['balance_before'] }} -> {{ s['balance_after'] }}; "
              "{{ s['replica_movements'] }} replica movement(s), {{ s['data_to_move_bytes'] }} bytes to copy, "
              "estimated {{ s['estimated_seconds'] }} s. "
              "The plan is {{ s['plan_file'] }} (summary and chart beside it)."),
        defaults="Reject",
        response_timeout=timedelta(hours=12),
        ignore_downstream_trigger_rules=True,
    )
    no_approval = EmptyOperator(task_id="approval_not_required")

    tasks = reassignment_tasks(plan=None, goal=None, brokers=None, replication_factor=None, planning=planning)
    # One of the two gate branches is skipped by design.
    tasks.prepare.trigger_rule = TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS
    # The run options are kafka_reassign's params; this DAG's own params are not among them.
    tasks.prepare.options = {name: "{{ params.%s }}" % name for name in dag.params
                             if name not in REBALANCE_ONLY}

    planning.plan >> go >> gate >> [approve, no_approval]
    [approve, no_approval] >> tasks.prepare


def rebalance_dag(fleet: Fleet, entry: FleetEntry) -> DAG:
    """The scheduled rebalance DAG of one cluster of the fleet."""
    dag_id = rebalance_dag_id(fleet, entry)
    with DAG(
        dag_id=dag_id,
        description=f"Scheduled: plan a rebalance of {entry.conn_id} on Spark; act through kafka_reassign's "
                    "tasks when over the threshold",
        schedule=_schedule(entry),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        render_template_as_native_obj=True,
        params=_params(entry, fleet),
        doc_md=DOC_MD,
        tags=["kafka", "reassignment", "rebalance", f"cluster:{entry.conn_id}"],
        default_args={"owner": "kafka-ops", "retries": 0},
        on_failure_callback=run_notifiers("failure", "kafka_rebalance"),
        on_success_callback=run_notifiers("success", "kafka_rebalance"),
    ) as dag:
        _wire(dag)
    return dag


FLEET = load_fleet()
for _entry in FLEET.entries:
    # Module-level names are what the DAG processor collects.
    globals()[rebalance_dag_id(FLEET, _entry)] = rebalance_dag(FLEET, _entry)
