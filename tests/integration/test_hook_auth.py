"""The Airflow hook end to end on a secured simulator: a ``kafka_reassign`` connection (host =
bootstrap servers, login/password = SASL, extra = TLS as inline PEM) and a Kafka provider
``kafka`` connection both reach a SASL_SSL cluster; the UI's connection test says so."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from kafka_sim.auth import ListenerSecurity, server_ssl_context  # noqa: E402
from tls_certs import make_pki  # noqa: E402

pytestmark = [pytest.mark.airflow]


def test_both_connection_types_reach_a_sasl_ssl_cluster(tmp_path, sim_cluster, small_snapshot, monkeypatch):
    pki = make_pki(tmp_path / "pki")
    ctx = server_ssl_context(str(pki.server_cert), str(pki.server_key))
    cluster = sim_cluster(small_snapshot, security=ListenerSecurity(
        protocol="SASL_SSL", users={"ops": "s3cret"}, ssl_context=ctx))
    monkeypatch.setenv("AIRFLOW_CONN_SECURED_FORM", json.dumps({
        "conn_type": "kafka_reassign", "host": cluster.bootstrap_servers, "login": "ops", "password": "s3cret",
        "extra": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                  "ssl.ca.pem": pki.ca_pem.read_text()}}))
    monkeypatch.setenv("AIRFLOW_CONN_SECURED_PROVIDER", json.dumps({
        "conn_type": "kafka", "extra": {"bootstrap.servers": cluster.bootstrap_servers,
                                        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                        "sasl.username": "ops", "sasl.password": "s3cret",
                                        "ssl.ca.location": str(pki.ca_pem)}}))
    monkeypatch.setenv("AIRFLOW_CONN_WRONG_PASSWORD", json.dumps({
        "conn_type": "kafka_reassign", "host": cluster.bootstrap_servers, "login": "ops", "password": "nope",
        "extra": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                  "ssl.ca.location": str(pki.ca_pem)}}))
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__ADMIN_BOOTSTRAP_TIMEOUT_MS", "2000")
    from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook

    for conn_id in ("secured_form", "secured_provider"):
        ok, message = KafkaAdminHook(kafka_config_id=conn_id).test_connection()
        assert ok, f"{conn_id}: {message}"
        assert message == f"Connected: {len(small_snapshot['brokers'])} brokers, {len(small_snapshot['topics'])} topics."
    ok, message = KafkaAdminHook(kafka_config_id="wrong_password").test_connection()
    assert not ok and "refused the connection's credentials" in message and "s3cret" not in message
