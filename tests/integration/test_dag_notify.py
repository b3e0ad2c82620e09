"""A failing kafka_reassign run calls its notifier: real Airflow (dag.test), the simulator over
TCP and a real SMTP exchange with a local sink; the channel comes from [kafka_reassign] config."""
from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from smtp_sink import SmtpSink  # noqa: E402
from test_dag_reassign import airflow_db, kafka_conn, plan_of, six_broker_snapshot  # noqa: E402,F401

pytestmark = [pytest.mark.airflow]


def test_failing_run_mails_its_failure(airflow_db, sim_cluster, kafka_conn, monkeypatch):
    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    kafka_conn(cluster)
    with SmtpSink() as sink:
        monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__KAFKA_REASSIGN_NOTIFY_ON_FAILURE", "smtp:kafka-ops@example.com; log")
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", json.dumps({
            "conn_type": "smtp", "host": "127.0.0.1", "port": sink.port,
            "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "airflow@example.com"}}))
        # Broker 99 does not exist: prepare refuses the plan, nothing is written, the run fails.
        dr = airflow_env.run_dag({"plan": plan_of(("orders", 0, [1, 2, 99]))})
        assert dr.state == "failed"
        assert len(sink.messages) == 1, "the DAG's failure notifier sent no mail"
    mail = sink.messages[0]
    assert mail["To"] == "kafka-ops@example.com"
    assert mail["Subject"].startswith(f"[kafka-reassign] kafka_reassign {dr.run_id}: FAILED")
    body = "".join(part.get_payload(decode=True).decode() for part in mail.walk() if not part.is_multipart())
    assert "prepare" in body  # the failed task is named
    assert "THROTTLE LEFT" not in mail["Subject"]
    assert os.environ.get("AIRFLOW__KAFKA_REASSIGN__KAFKA_REASSIGN_NOTIFY_ON_FAILURE")


def _dag_retrying_at_once() -> Any:
    """kafka_reassign with its task retries (execute, throttle_remove) a second apart instead of
    10-15 s: against a cluster that stays down, the retries fail all the same, only sooner."""
    dag = airflow_env.load_dag("kafka_reassign")  # a fresh parse: nothing else sees the change
    for task in dag.tasks:
        task.retry_delay = timedelta(seconds=1)
    return dag


def test_throttle_left_behind_is_reported_with_the_cleanup(airflow_db, sim_cluster, kafka_conn, monkeypatch):
    """Kafka goes away once the throttle is set: the teardown cannot restore it, and the failure
    mail names the brokers still throttled and how to clean them."""
    from test_dag_reassign import FAST, HAPPY_PLAN

    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    kafka_conn(cluster)
    brokers = [b["id"] for b in cluster.snapshot()["brokers"]]

    def stop_all() -> None:
        for b in brokers:
            cluster.stop_broker(b)

    with SmtpSink() as sink:
        monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__NOTIFY_ON_FAILURE", "smtp:kafka-ops@example.com")
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", json.dumps({
            "conn_type": "smtp", "host": "127.0.0.1", "port": sink.port,
            "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "airflow@example.com"}}))
        with airflow_env.Watcher([(lambda: airflow_env.ti_state("kafka_reassign", "throttle_set") == "success",
                                   stop_all)]) as w:
            dr = _dag_retrying_at_once().test(run_conf={"plan": HAPPY_PLAN, "throttle_bytes_per_sec": 10_000_000,
                                                        **FAST})
        assert w.error is None and w.done == [0]
        assert dr.state == "failed"
        assert airflow_env.task_states(dr)["throttle_remove"] == "failed"
        assert len(sink.messages) == 1
    mail = sink.messages[0]
    assert mail["Subject"].endswith("THROTTLE LEFT ON THE CLUSTER")
    body = "".join(part.get_payload(decode=True).decode() for part in mail.walk() if not part.is_multipart())
    record = airflow_env.read_record(dr.run_id)
    left = sorted({c.name for c in record.changes if c.resource_type == "broker"}, key=int)
    assert left and f"broker(s) {', '.join(left)}" in body
    assert "kafka_throttle_reconciler" in body
    assert f"kafka-configs.sh --bootstrap-server {cluster.bootstrap_servers} --entity-type brokers --entity-name {left[0]}" in body
    for b in brokers:  # the cluster comes back: the reconciler's job from here (tested elsewhere)
        cluster.start_broker(b)
