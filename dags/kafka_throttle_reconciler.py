"""kafka_throttle_reconciler: every 15 minutes, undo replication throttles our runs left behind.

A reassignment run records every throttle config it sets, with the value before, in the
Airflow metadata DB *before* writing it, and its teardown task restores them. When the
worker died mid-run or the teardown could not reach Kafka, the record stays unrestored
and the throttle stays on the brokers, slowing every later replica movement. This DAG:

1. does nothing while any partition reassignment is in flight on the cluster;
2. leaves alone the records of runs still queued or running (between two moves nothing
   is in flight, yet their throttle is in use);
3. restores the prior value of everything the other unrestored records changed (the same
   restore code the teardown uses), reads it back and marks the records restored;
4. reports throttles set by anyone else (a person, kafka-reassign-partitions.sh, Cruise
   Control) without touching them, unless ``remove_foreign_throttles`` is on.

Logic lives in ``kafka_reassign.throttle.reconciler`` (no Airflow); this file is wiring.
"""
from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import Param, dag, task

from kafka_reassign_airflow.params import dag_schedule
from kafka_reassign_airflow.notifications import run_notifiers

#: DAGs whose runs set throttles; a run of one of them still queued/running owns its throttle.
THROTTLING_DAG_IDS = ["kafka_reassign", "kafka_rebalance"]


@dag(
    dag_id="kafka_throttle_reconciler",
    schedule=dag_schedule("reconciler_schedule", "*/15 * * * *"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "reassignment", "throttle"],
    doc_md=__doc__,
    default_args={"retries": 1, "retry_delay": pendulum.duration(minutes=2)},
    on_failure_callback=run_notifiers("failure", "kafka_throttle_reconciler"),
    params={
        "kafka_conn_id": Param("kafka_default", type="string", minLength=1, title="Kafka connection",
                               description="Airflow connection id of the cluster to reconcile."),
        "remove_foreign_throttles": Param(
            False, type="boolean", title="Remove foreign throttles",
            description="Also delete throttle configs this project did not set. Off by default: "
                        "someone may be protecting a broker on purpose. Removals are recorded "
                        "(with the values removed) before they are made."),
        "dry_run": Param(False, type="boolean", title="Dry run",
                         description="Report what would be restored or removed; write nothing."),
        "throttling_dag_ids": Param(
            THROTTLING_DAG_IDS, type="array", items={"type": "string"}, title="DAGs that set throttles",
            description="A queued or running run of these DAGs owns its throttle: left alone."),
    },
)
def kafka_throttle_reconciler() -> None:
    @task(task_id="reconcile_throttles")
    def reconcile_throttles(params: dict[str, Any], **context: Any) -> dict[str, Any]:
        """Restore throttles of dead runs; report foreign ones. Returns the report as JSON."""
        from kafka_reassign.throttle.reconciler import reconcile
        from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook
        from kafka_reassign_airflow.record_store import VariableRecordStore

        ti = context["ti"]
        store = VariableRecordStore()
        dag_ids = list(params["throttling_dag_ids"])

        def is_active(run_id: str) -> bool:
            return any(ti.get_dr_count(dag_id=d, run_ids=[run_id], states=["queued", "running"]) > 0
                       for d in dag_ids)

        active = {r.run_id for r in store.list_unrestored() if is_active(r.run_id)}
        admin = KafkaAdminHook(kafka_config_id=params["kafka_conn_id"]).get_admin()
        try:
            report = reconcile(admin, store, active_run_ids=active,
                               remove_foreign=bool(params["remove_foreign_throttles"]),
                               dry_run=bool(params["dry_run"]),
                               reconciler_run_id=f"{context['dag'].dag_id}/{context['run_id']}")
        finally:
            admin.close()
        print(report.summary())
        if report.foreign and not params["remove_foreign_throttles"]:
            print(f"{len(report.foreign)} throttle setting(s) were not set by this project and were left "
                  "as they are; trigger with remove_foreign_throttles=true to delete them.")
        return report.to_json()

    reconcile_throttles()


kafka_throttle_reconciler()
