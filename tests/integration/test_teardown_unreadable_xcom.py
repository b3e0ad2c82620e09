"""An upgrade mid-run leaves prepare's XCom in a schema this release refuses: the teardown still
restores the throttle from the durable record, releases the cluster lock, then fails naming why."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from test_dag_reassign import airflow_db, kafka_conn, plan_of, six_broker_snapshot  # noqa: E402,F401

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

RUN_ID = "manual__unreadable-xcom"


class _TI:
    dag_id = "kafka_reassign"

    def __init__(self, value: Any) -> None:
        self.value = value

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        return self.value


def _throttle_configs(cluster: Any) -> dict[str, dict[str, str]]:
    from kafka_reassign.cluster.admin import KafkaAdmin

    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        configs = admin.describe_configs(broker_ids=range(1, 7))
    return {name: {k: v for k, v in cfg.items() if "throttled" in k} for name, cfg in configs.items()}


def test_teardown_restores_from_the_record_when_the_prepared_xcom_is_unreadable(airflow_db, sim_cluster,
                                                                                kafka_conn):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.throttle.apply import apply_throttle
    from kafka_reassign_airflow.operators.throttle import ThrottleRemoveOperator
    from kafka_reassign_airflow.record_store import ClusterLock, VariableRecordStore

    cluster = sim_cluster(six_broker_snapshot())
    kafka_conn(cluster)
    before = _throttle_configs(cluster)
    store = VariableRecordStore()
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        prepared = prepare(admin, plan_of(("orders", 0, [4, 5, 6])),
                           {"throttle_bytes_per_sec": 5_000_000, "produce_sample_seconds": 0})
        apply_throttle(admin, prepared, store, RUN_ID)
    ClusterLock(lambda dag, run: True).acquire(prepared.cluster_id, "kafka_reassign", RUN_ID)
    assert _throttle_configs(cluster) != before

    unversioned = {**prepared.to_json(), "before": {}}  # what the previous release pushed
    op = ThrottleRemoveOperator(task_id="throttle_remove")
    with pytest.raises(AirflowFailException, match="no schema_version"):
        op.execute({"run_id": RUN_ID, "ti": _TI(unversioned)})  # type: ignore[arg-type]

    assert _throttle_configs(cluster) == before
    assert store.get(RUN_ID).restored  # type: ignore[union-attr]
    assert ClusterLock.holder(prepared.cluster_id) is None
