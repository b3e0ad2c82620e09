"""kafka_reassign: move Kafka partition replicas safely (manual trigger or REST API).

The file is not named kafka_reassign.py on purpose: Airflow puts the dags folder on sys.path,
and a module of that name there would shadow the kafka_reassign package in task processes.

Wiring only: the tasks live in kafka_reassign_airflow (plugins/), the logic in kafka_reassign
(include/). Nothing here touches the network or imports Kafka or Spark at parse time.
"""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from kafka_reassign_airflow.fleet import max_active_runs, planning_pool
from kafka_reassign_airflow.operators.workflow import planning_tasks, reassignment_tasks
from kafka_reassign_airflow.params import reassign_params
from kafka_reassign_airflow.notifications import run_notifiers

DOC_MD = """
# kafka_reassign — safe Kafka partition reassignment

Moves partition replicas as KIP-435 steps under a KIP-73 replication throttle, keeping a
window of steps in flight (like Cruise Control's executor: at most `max_partition_movements`
in the cluster, `max_movements_per_broker` per broker) and starting the next one as soon as one
finishes, watching lag and ISR; it always puts the throttle configs back to the values they had
before the run — whatever fails.

**Tasks**: `snapshot` → `plan` (only when `plan` is null: the cluster snapshot, then the
Spark planning job submitted with the Spark provider's SparkSubmitOperator to the
`spark_conn_id` connection; skipped when a plan is given) → `prepare` (read the cluster, validate plan and params, build the KIP-435 steps; a dry run
stops here and prints the plan, the steps and the exact config changes) → `throttle_set`
(prior values recorded in the metadata DB first, Variables `kafka_reassign.throttle.<run id>`)
→ `execute` (one deferrable task whatever the plan's size: submits steps as room frees up, its
trigger watches the steps in flight; progress saved after every poll in Variable
`kafka_reassign.exec.<run id>`, read by the progress page and by a resumed task) → `cancel_on_failure`
(reverts this run's in-flight moves after a failure, if the param is on) → `throttle_remove`
(teardown: restores every config, also when the run is marked failed by hand) → `report`
(placement vs plan, configs prior vs now, time taken).

Runs on different clusters go in parallel (up to `[kafka_reassign] max_active_runs`, default 16);
runs on one cluster never do: `prepare` takes a lock keyed by the cluster id read from Kafka
(Variable `kafka_reassign.lock.<cluster id>`, so two connections to one cluster share it) and
refuses a second run, naming the run that holds it, before writing anything. A plan touching a
partition another tool is reassigning is refused, naming the partition.

## From the UI
*Trigger DAG* → fill the form: paste the plan (Kafka reassignment JSON as
`kafka-reassign-partitions.sh --generate`, Cruise Control or topicmappr write it), pick the
throttle and movement limits, tick **Dry run** first to see exactly what would happen.

## From the REST API
```bash
TOKEN=$(curl -s -X POST http://localhost:8080/auth/token \\
  -H 'Content-Type: application/json' -d '{"username": "admin", "password": "admin"}' | jq -r .access_token)

curl -s -X POST http://localhost:8080/api/v2/dags/kafka_reassign/dagRuns \\
  -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{
    "logical_date": null,
    "conf": {
      "plan": {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3], "log_dirs": ["any", "any", "any"]}]},
      "throttle_bytes_per_sec": 20000000,
      "max_partition_movements": 10,
      "max_movements_per_broker": 4,
      "dry_run": true
    }}'
```
Then follow it with `GET /api/v2/dags/kafka_reassign/dagRuns/{dag_run_id}`, the task log of
`execute` (a table of the steps in flight and a summary line each time it wakes up) or the
*Kafka progress* page.

With `"plan": null` and a `goal` (`rebalance`, `add-brokers`, `remove-brokers` + `brokers`,
`replication-factor` + `replication_factor`, `rack-repair`) the plan is computed on Spark:
`snapshot` writes the cluster snapshot to the run's directory (`[kafka_reassign] work_dir`,
default `$AIRFLOW_HOME/kafka_reassign/<dag_id>/<run_id>/`), `plan` runs `spark-submit
kafka_reassign/planning/spark/spark_job.py` on the `spark_conn_id` connection's master (`local[2]`
when the connection does not exist), which writes `PLAN.json`, `PLAN.summary.json` and
`PLAN.chart.png` there and logs the summary line; `prepare` reads `PLAN.json`. A plan given in
the conf always wins (then `snapshot` and `plan` are skipped).

## When something fails
The run fails with a message saying what to change (stall: raise the throttle above the
produce rate; offline broker: start it or plan without it; a move not done
`move_timeout_minutes` after its submission: raise it). With `cancel_on_failure` the moves in flight are reverted; the
throttle is removed in every case. Re-running the same plan resumes: partitions already at
their target are not moved again.
"""

with DAG(
    dag_id="kafka_reassign",
    description="Move Kafka partition replicas as a throttled, watched window of moves; always remove the throttle",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=max_active_runs(),
    render_template_as_native_obj=True,
    params=reassign_params(),
    doc_md=DOC_MD,
    tags=["kafka", "reassignment"],
    default_args={"owner": "kafka-ops", "retries": 0},
    on_failure_callback=run_notifiers("failure", "kafka_reassign"),
    on_success_callback=run_notifiers("success", "kafka_reassign"),
) as dag:
    planning = planning_tasks()
    planning.plan.pool = planning_pool()  # bounds the Spark jobs running at once, fleet-wide
    reassignment_tasks(planning=planning)
