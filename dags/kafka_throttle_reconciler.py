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

One run sweeps every cluster of the fleet (``[kafka_reassign] fleet`` or the Variable
``kafka_reassign_fleet``; ``kafka_default`` without one): ``reconcile_throttles`` is mapped
over the clusters, one task instance per cluster (its map index is named after the
connection), so the clusters are reconciled in parallel and an unreachable cluster fails
its own task instance only. ``sweep_summary`` then logs one line per cluster and fails the
run, naming the clusters it could not reconcile, so the failure notification says which.

Logic lives in ``kafka_reassign.throttle.reconciler`` (no Airflow); this file is wiring.
"""
from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import Param, TriggerRule, dag, task

from kafka_reassign_airflow.fleet import load_fleet, rebalance_dag_id
from kafka_reassign_airflow.params import dag_schedule
from kafka_reassign_airflow.notifications import run_notifiers

FLEET = load_fleet()
#: DAGs whose runs set throttles; a run of one of them still queued/running owns its throttle.
THROTTLING_DAG_IDS = ["kafka_reassign", *dict.fromkeys(rebalance_dag_id(FLEET, e) for e in FLEET.entries)]


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
        "kafka_conn_ids": Param(FLEET.conn_ids, type="array", minItems=1, uniqueItems=True,
                                items={"type": "string", "minLength": 1}, title="Kafka connections",
                                description="Airflow connection ids of the clusters to reconcile "
                                            "(default: every cluster of the fleet)."),
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
    @task(task_id="clusters")
    def clusters(params: dict[str, Any]) -> list[str]:
        """The connections to sweep (the map of ``reconcile_throttles``)."""
        return list(params["kafka_conn_ids"])

    @task(task_id="reconcile_throttles", map_index_template="{{ task.op_kwargs['kafka_conn_id'] }}")
    def reconcile_throttles(kafka_conn_id: str, params: dict[str, Any], **context: Any) -> dict[str, Any]:
        """Restore throttles of dead runs on one cluster; report foreign ones. Returns the report as JSON."""
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
        admin = KafkaAdminHook(kafka_config_id=kafka_conn_id).get_admin()
        try:
            report = reconcile(admin, store, active_run_ids=active,
                               remove_foreign=bool(params["remove_foreign_throttles"]),
                               dry_run=bool(params["dry_run"]),
                               reconciler_run_id=f"{context['dag'].dag_id}/{context['run_id']}")
        finally:
            admin.close()
        print(f"[{kafka_conn_id}] {report.summary()}")
        if report.foreign and not params["remove_foreign_throttles"]:
            print(f"{len(report.foreign)} throttle setting(s) were not set by this project and were left "
                  "as they are; trigger with remove_foreign_throttles=true to delete them.")
        return {"kafka_conn_id": kafka_conn_id, **report.to_json()}

    @task(task_id="sweep_summary", trigger_rule=TriggerRule.ALL_DONE)
    def sweep_summary(conn_ids: list[str], **context: Any) -> dict[str, Any]:
        """One line per cluster; fail naming the clusters that could not be reconciled."""
        from airflow.sdk.exceptions import AirflowFailException

        reports = context["ti"].xcom_pull(task_ids="reconcile_throttles") or []
        reports = [reports] if isinstance(reports, dict) else [r for r in reports if isinstance(r, dict)]
        done = {r["kafka_conn_id"]: r for r in reports}
        missing = [c for c in conn_ids if c not in done]
        for conn_id in conn_ids:
            report = done.get(conn_id)
            print(f"{conn_id}: " + ("NOT reconciled (unreachable or failed: see its reconcile_throttles "
                                    "task instance)" if report is None else
                                    f"{len(report.get('restored', []))} run(s) restored, "
                                    f"{len(report.get('foreign', []))} foreign setting(s)"))
        if missing:
            raise AirflowFailException(f"{len(missing)} of {len(conn_ids)} cluster(s) not reconciled: "
                                       f"{', '.join(missing)}; the others were")
        return {"clusters": len(conn_ids)}

    conn_ids = clusters()
    reconcile_throttles.expand(kafka_conn_id=conn_ids) >> sweep_summary(conn_ids)


kafka_throttle_reconciler()
