"""Security over the wire: the simulator's TLS, SASL PLAIN and SCRAM listeners against the
project's own mapping (kafka_reassign.cluster.auth -> kafka-python) and against confluent-kafka
(librdkafka, the Kafka provider's client), with a certificate authority made at test time."""
from __future__ import annotations

import logging

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.cluster.auth import client_kwargs
from kafka_reassign.errors import KafkaAdminError
from kafka_sim.auth import ListenerSecurity, server_ssl_context
from tls_certs import make_pki

USERS = {"ops": "s3cret-pw", "alice": "p@ss=word,"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _secured(sim_cluster, snapshot, pki, protocol, mutual=False):
    ctx = (server_ssl_context(str(pki.server_cert), str(pki.server_key), str(pki.ca_pem), require_client_cert=mutual)
           if protocol.endswith("SSL") else None)
    return sim_cluster(snapshot, security=ListenerSecurity(protocol=protocol, users=USERS, ssl_context=ctx))


def _admin(extra: dict) -> KafkaAdmin:
    return KafkaAdmin(retry_attempts=1, bootstrap_timeout_ms=5000, **client_kwargs(extra))


@pytest.mark.parametrize("protocol, mechanism, user", [
    ("SASL_PLAINTEXT", "PLAIN", "ops"),
    ("SASL_SSL", "PLAIN", "ops"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice"),
    ("SASL_SSL", "SCRAM-SHA-512", "ops"),
])
def test_kafka_python_authenticates_with_the_mapped_connection(sim_cluster, small_snapshot, pki, protocol, mechanism, user):
    cluster = _secured(sim_cluster, small_snapshot, pki, protocol)
    extra = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": protocol,
             "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": USERS[user]}
    if protocol == "SASL_SSL":
        extra["ssl.ca.pem"] = pki.ca_pem.read_text()  # inline PEM, as a connection extra carries it
    with _admin(extra) as admin:
        state = admin.cluster_state()
    assert sorted(state.brokers) == sorted(b["id"] for b in small_snapshot["brokers"])


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_is_refused_by_the_broker(sim_cluster, small_snapshot, pki, mechanism, caplog):
    cluster = _secured(sim_cluster, small_snapshot, pki, "SASL_PLAINTEXT")
    extra = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": mechanism, "sasl.username": "ops", "sasl.password": "wrong"}
    caplog.set_level(logging.WARNING, logger="kafka")  # whatever an earlier test set it to
    with pytest.raises(KafkaAdminError) as err:
        KafkaAdmin(retry_attempts=1, bootstrap_timeout_ms=1500, **client_kwargs(extra))
    # The error says why, not only "cannot reach": kafka-python only logs the broker's answer.
    assert "refused the connection's credentials" in str(err.value)
    assert "Invalid username or password" in str(err.value) or "invalid credentials" in str(err.value)
    # The broker's answer, as kafka-python logs it (Kafka never says whether the user exists).
    refused = [r.getMessage() for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()]
    assert refused and ("Invalid username or password" in refused[0] or "invalid credentials" in refused[0])


def test_mutual_tls_with_a_pkcs12_keystore(sim_cluster, small_snapshot, pki, caplog):
    cluster = _secured(sim_cluster, small_snapshot, pki, "SSL", mutual=True)
    caplog.set_level(logging.WARNING, logger="kafka")  # restored after the test
    extra = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SSL",
             "ssl.ca.location": str(pki.ca_pem), "ssl.keystore.location": str(pki.client_p12),
             "ssl.keystore.password": pki.p12_password}
    with _admin(extra) as admin:
        assert admin.cluster_state().brokers
    # Without a client certificate the broker refuses the TLS handshake.
    with pytest.raises(KafkaAdminError):
        KafkaAdmin(retry_attempts=1, bootstrap_timeout_ms=1500, bootstrap_servers=cluster.bootstrap_servers,
                   security_protocol="SSL", ssl_cafile=str(pki.ca_pem))
    # A broker certificate from another CA is named as such, even with kafka-python silenced
    # (as the CLI does without -v).
    logging.getLogger("kafka").setLevel(logging.CRITICAL + 1)
    with pytest.raises(KafkaAdminError, match="certificate verify failed"):
        KafkaAdmin(retry_attempts=1, bootstrap_timeout_ms=1500, bootstrap_servers=cluster.bootstrap_servers,
                   security_protocol="SSL", ssl_cafile=str(pki.client_cert))


def _confluent_topics(config: dict) -> set[str]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient(config).list_topics(timeout=15)
    return set(md.topics)


@pytest.mark.parametrize("protocol, mechanism", [("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512"),
                                                 ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SSL", None)])
def test_confluent_kafka_speaks_the_same_listeners(sim_cluster, small_snapshot, pki, protocol, mechanism):
    cluster = _secured(sim_cluster, small_snapshot, pki, protocol, mutual=protocol == "SSL")
    config = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": protocol}
    if mechanism:
        config.update({"sasl.mechanism": mechanism, "sasl.username": "ops", "sasl.password": USERS["ops"]})
    if protocol.endswith("SSL"):
        config["ssl.ca.location"] = str(pki.ca_pem)
    if protocol == "SSL":
        config.update({"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)})
    topics = {t["name"] for t in small_snapshot["topics"]}
    assert topics <= _confluent_topics(config)


def test_a_plaintext_client_gets_nothing_from_a_sasl_listener(sim_cluster, small_snapshot, pki):
    cluster = _secured(sim_cluster, small_snapshot, pki, "SASL_PLAINTEXT")
    with pytest.raises(Exception):
        _admin({"bootstrap.servers": cluster.bootstrap_servers}).cluster_state()
