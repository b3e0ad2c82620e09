"""The one security mapping (connection extra / client properties -> kafka-python kwargs).

Mechanisms the simulator speaks (PLAIN, SCRAM, TLS) are also tested over the wire in
tests/integration/test_sim_auth.py; these tests cover every mapping, including the ones no
simulator can check (GSSAPI, MSK IAM, OAUTHBEARER callbacks).
"""
from __future__ import annotations

import json
import os
import ssl
import stat
import sys
import types

import pytest

from kafka_reassign.cluster.admin import redact
from kafka_reassign.cluster.auth import (AuthConfigError, CallbackTokenProvider, MskIamTokenProvider, client_kwargs,
                                 msk_region)
from tls_certs import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_scram_over_tls_from_files_maps_every_key_and_redacts_secrets(pki):
    kw = client_kwargs({
        "bootstrap.servers": "b1:9093, b2:9093", "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "ops", "sasl.password": "s3cret",
        "ssl.ca.location": str(pki.ca_pem), "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key), "ssl.key.password": "k3y",
        "ssl.endpoint.identification.algorithm": "none", "group.id": "ignored", "request.timeout.ms": "5000"})
    assert kw == {"bootstrap_servers": ["b1:9093", "b2:9093"], "security_protocol": "SASL_SSL",
                  "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "ops", "sasl_plain_password": "s3cret",
                  "ssl_cafile": str(pki.ca_pem), "ssl_certfile": str(pki.client_cert),
                  "ssl_keyfile": str(pki.client_key), "ssl_password": "k3y", "ssl_check_hostname": False,
                  "request_timeout_ms": 5000}
    shown = json.dumps(redact(kw))
    assert "s3cret" not in shown and "k3y" not in shown


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms_need_both_credentials(mechanism):
    base = {"bootstrap.servers": "b:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism}
    assert client_kwargs({**base, "sasl.username": "u", "sasl.password": "p"})["sasl_mechanism"] == mechanism
    with pytest.raises(AuthConfigError, match="sasl.username and sasl.password"):
        client_kwargs({**base, "sasl.username": "u"})


def test_java_jaas_config_gives_the_credentials():
    kw = client_kwargs({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config":
                        'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";'},
                       strict=True, callback_allowlist=None)
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("a", "b")


def test_inline_pem_is_written_to_private_files_never_dropped(pki):
    kw = client_kwargs({"bootstrap.servers": "b:1", "security.protocol": "SSL",
                        "ssl.ca.pem": pki.ca_pem.read_text().replace("\n", "\\n"),
                        "ssl.certificate.pem": pki.client_cert.read_text(),
                        "ssl.key.pem": pki.client_key.read_text()})
    for key, src in (("ssl_cafile", pki.ca_pem), ("ssl_certfile", pki.client_cert), ("ssl_keyfile", pki.client_key)):
        assert open(kw[key]).read().strip() == src.read_text().strip()
        assert stat.S_IMODE(os.stat(kw[key]).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(kw[key])).st_mode) == 0o700
    with pytest.raises(AuthConfigError, match="ssl.ca.pem is not PEM"):
        client_kwargs({"security.protocol": "SSL", "ssl.ca.pem": "not a certificate"})


def test_pkcs12_keystore_becomes_pem_and_jks_is_refused(pki):
    kw = client_kwargs({"security.protocol": "SSL", "ssl.keystore.location": str(pki.client_p12),
                        "ssl.keystore.password": pki.p12_password, "ssl.ca.location": str(pki.ca_pem)})
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_cert_chain(kw["ssl_certfile"], kw["ssl_keyfile"])  # a usable pair
    with pytest.raises(AuthConfigError, match="wrong password"):
        client_kwargs({"security.protocol": "SSL", "ssl.keystore.location": str(pki.client_p12),
                       "ssl.keystore.password": "nope"})
    with pytest.raises(AuthConfigError, match="JKS cannot be read"):
        client_kwargs({"security.protocol": "SSL", "ssl.truststore.location": str(pki.ca_pem)})


def test_verification_off_and_ciphers_build_an_ssl_context(pki):
    kw = client_kwargs({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false",
                        "ssl.ca.location": str(pki.ca_pem)})
    assert kw["ssl_context"].verify_mode == ssl.CERT_NONE and kw["ssl_check_hostname"] is False
    kw = client_kwargs({"security.protocol": "SSL", "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"})
    assert kw["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(AuthConfigError, match="ssl.cipher.suites"):
        client_kwargs({"security.protocol": "SSL", "ssl.cipher.suites": "NO-SUCH-CIPHER"})


@pytest.mark.parametrize("config, message", [
    ({"security.protocol": "TLS"}, "security.protocol 'TLS' is not one of"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "KERBEROS"}, "sasl.mechanism 'KERBEROS' is not one of"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"}, "no such file"),
    ({"security.protocol": "PLAINTEXT", "sasl.mechanism": "PLAIN"}, "SASL to be used"),
    ({"security.protocol": "PLAINTEXT", "ssl.ca.location": "/etc/hosts"}, "TLS certificates are set"),
    ({"security.protocol": "SSL", "ssl.providers": "legacy"}, "'ssl.providers' is not supported"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.kerberos.keytab": "/k"}, "does not run kinit"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "needs a token source"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc"}, "oidc"),
    ({"security.protocol": "SSL", "ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nx\n"}, "without its certificate"),
])
def test_settings_that_cannot_be_used_are_refused_by_name(config, message):
    with pytest.raises(AuthConfigError, match=message):
        client_kwargs({"bootstrap.servers": "b:1", **config})


def test_gssapi_needs_the_gssapi_package(monkeypatch):
    base = {"bootstrap.servers": "b:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka-prod"}
    monkeypatch.setitem(sys.modules, "gssapi", None)  # not installed
    with pytest.raises(AuthConfigError, match="needs the Python package 'gssapi'"):
        client_kwargs(base)
    monkeypatch.setitem(sys.modules, "gssapi", types.ModuleType("gssapi"))
    assert client_kwargs(base) == {"bootstrap_servers": ["b:1"], "security_protocol": "SASL_PLAINTEXT",
                                   "sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": "kafka-prod"}


def oauth_cb(config_str):
    """A token callable as a Kafka connection names it (confluent-kafka's oauth_cb signature)."""
    oauth_cb.calls.append(config_str)
    return f"token-{len(oauth_cb.calls)}", 4_000_000_000.0, "principal", {"traceId": "t1"}


oauth_cb.calls = []


def test_oauthbearer_token_comes_from_the_allowlisted_callable():
    from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

    path = f"{__name__}.oauth_cb"
    cfg = {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
           "oauth_cb": path, "sasl.oauthbearer.config": "scope=kafka"}
    kw = client_kwargs(cfg, callback_allowlist=[path])
    provider = kw["sasl_oauth_token_provider"]
    assert isinstance(provider, CallbackTokenProvider) and isinstance(provider, AbstractTokenProvider)
    oauth_cb.calls.clear()
    # kafka-python's own OAUTHBEARER mechanism accepts it and sends the token (cached: one call).
    sent = SaslMechanismOAuth(sasl_oauth_token_provider=provider).auth_bytes()
    assert sent == b"n,,\x01auth=Bearer token-1\x01traceId=t1\x01\x01"
    assert provider.token() == "token-1" and oauth_cb.calls == ["scope=kafka"]
    with pytest.raises(AuthConfigError, match="callback_allowlist"):
        client_kwargs(cfg, callback_allowlist=[])


def test_msk_bootstrap_with_oauthbearer_signs_with_aws_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    servers = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098,b-2.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"
    assert msk_region(servers.split(",")) == "eu-west-1"
    kw = client_kwargs({"bootstrap.servers": servers, "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"})
    provider = kw["sasl_oauth_token_provider"]
    assert isinstance(provider, MskIamTokenProvider) and provider.region == "eu-west-1"
    token = provider.token()  # signed locally (SigV4, no network): a base64url presigned URL
    import base64
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    assert url.startswith("https://kafka.eu-west-1.amazonaws.com/") and "Action=kafka-cluster%3AConnect" in url
    assert "AKIDEXAMPLE" in url and "X-Amz-Signature=" in url
    # kafka-python's spelling AWS_MSK_IAM maps to the same; plaintext SASL is refused.
    kw2 = client_kwargs({"bootstrap.servers": servers, "security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM"})
    assert kw2["sasl_mechanism"] == "OAUTHBEARER"
    with pytest.raises(AuthConfigError, match="SASL_SSL"):
        client_kwargs({"bootstrap.servers": servers, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "AWS_MSK_IAM"})


def test_cli_properties_are_strict():
    from kafka_reassign.cli.main import BadInput, properties_to_admin_kwargs

    with pytest.raises(BadInput, match="--command-config: 'linger.ms' is not supported"):
        properties_to_admin_kwargs({"security.protocol": "SSL", "linger.ms": "5"})
