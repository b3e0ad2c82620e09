"""The DAG's snapshot task with the run param log_dir_capacity_bytes: a bad entry fails the task
before the cluster is even reached (nothing read, nothing written)."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.airflow]


def test_a_bad_capacity_fails_the_snapshot_task_before_connecting(monkeypatch, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_reassign_airflow.operators import planning

    def no_cluster(conn_id: str):
        raise AssertionError("the cluster was reached with a bad capacity")

    monkeypatch.setattr(planning, "admin_client", no_cluster)
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__WORK_DIR", str(tmp_path))
    op = planning.ClusterSnapshotOperator(task_id="snap_x", goal="rebalance",
                                          log_dir_capacity_bytes=["3=500GB", "-1TB", "x:/d=1TB"])
    with pytest.raises(AirflowFailException) as err:
        op.execute({})  # type: ignore[arg-type]
    text = str(err.value)
    assert "log_dir_capacity_bytes[1]" in text and "log_dir_capacity_bytes[2]" in text
    assert "log_dir_capacity_bytes[0]" not in text
    assert not list(tmp_path.iterdir())  # no planning dir made either
