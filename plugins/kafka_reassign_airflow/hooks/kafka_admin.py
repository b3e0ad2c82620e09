"""A hook that turns the Kafka provider's connection into a kafka-python admin client.

The Kafka provider's connection (``conn_type`` ``kafka``) keeps a librdkafka config dict in its
extra, because the provider's own hooks use confluent-kafka. confluent-kafka has no
reassignment, log-dir or ListPartitionReassignments calls, so this hook maps the same dict to
kafka-python's ``KafkaAdminClient`` keyword arguments and hands them to
:class:`kafka_reassign.admin.KafkaAdmin`, the one class that talks to Kafka.

Secrets (SASL password, SSL key password) are registered with Airflow's secrets masker as
soon as they are read and never appear in log lines, XComs or trigger kwargs: triggers carry
the connection id, not the config.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

if TYPE_CHECKING:
    from kafka_reassign.admin import KafkaAdmin

# librdkafka key -> kafka-python KafkaAdminClient keyword. Keys not listed (group.id,
# client.rack, consumer/producer tuning) mean nothing to an admin client and are ignored.
_DIRECT_KEYS: dict[str, str] = {
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "sasl.kerberos.principal": "sasl_kerberos_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
}
# Integer-valued librdkafka keys that have a kafka-python twin with the same meaning.
_INT_KEYS: dict[str, str] = {
    "request.timeout.ms": "request_timeout_ms",
    "socket.timeout.ms": "request_timeout_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
}
_SECRET_KEYS = frozenset({"sasl.password", "ssl.key.password", "ssl.key.pem", "sasl.oauthbearer.client.secret"})
_SECRET_KWARGS = frozenset({"sasl_plain_password", "ssl_password"})
_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"})


def _mask(value: Any) -> None:
    """Register a secret with Airflow's masker so it is redacted wherever it is logged."""
    if not value:
        return
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover - older Task SDKs
        return
    mask_secret(str(value))


def librdkafka_to_kafka_python(config: dict[str, Any]) -> dict[str, Any]:
    """Map a librdkafka config dict (the Kafka connection's extra) to KafkaAdminClient kwargs.

    :param config: the connection extra, e.g. ``{"bootstrap.servers": "b1:9092,b2:9092",
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", ...}``
    :raises ValueError: when bootstrap.servers is missing or a value cannot be mapped
    """
    servers = config.get("bootstrap.servers") or config.get("metadata.broker.list")
    if not servers:
        raise ValueError("the Kafka connection's extra has no 'bootstrap.servers'")
    if isinstance(servers, str):
        servers = [s.strip() for s in servers.split(",") if s.strip()]
    kwargs: dict[str, Any] = {"bootstrap_servers": list(servers)}
    for key in _SECRET_KEYS:
        _mask(config.get(key))

    for key, kw in _DIRECT_KEYS.items():
        if config.get(key) not in (None, ""):
            kwargs[kw] = config[key]
    for key, kw in _INT_KEYS.items():
        if config.get(key) not in (None, ""):
            try:
                kwargs[kw] = int(config[key])
            except (TypeError, ValueError):
                raise ValueError(f"the Kafka connection's {key!r} must be an integer") from None

    if "security_protocol" in kwargs:
        proto = str(kwargs["security_protocol"]).upper()
        if proto not in _PROTOCOLS:
            raise ValueError(f"unsupported security.protocol {kwargs['security_protocol']!r}; "
                             f"expected one of {sorted(_PROTOCOLS)}")
        kwargs["security_protocol"] = proto

    # librdkafka accepts both spellings; 'sasl.mechanisms' may be a list, of which a client
    # uses one.
    mechanism = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
    if mechanism:
        mechanism = str(mechanism).split(",")[0].strip().upper()
        if mechanism not in _MECHANISMS:
            raise ValueError(f"unsupported sasl.mechanism {mechanism!r}; expected one of {sorted(_MECHANISMS)}")
        kwargs["sasl_mechanism"] = mechanism

    algo = config.get("ssl.endpoint.identification.algorithm")
    if algo is not None:
        # librdkafka: "https" checks the broker's hostname against its certificate, "none" doesn't.
        kwargs["ssl_check_hostname"] = str(algo).strip().lower() == "https"
    if str(config.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        # kafka-python has no "verify nothing" switch short of a custom SSLContext; build one.
        import ssl

        ctx = ssl.create_default_context(cafile=kwargs.get("ssl_cafile"))
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if kwargs.get("ssl_certfile"):
            ctx.load_cert_chain(kwargs["ssl_certfile"], kwargs.get("ssl_keyfile"), kwargs.get("ssl_password"))
        kwargs["ssl_context"] = ctx
    return kwargs


def redacted(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A copy of admin kwargs that is safe to log (secrets replaced by ``***``).

    :param kwargs: KafkaAdminClient keyword arguments
    """
    return {k: ("***" if k in _SECRET_KWARGS and v else v) for k, v in kwargs.items() if k != "ssl_context"}


class KafkaAdminHook(KafkaBaseHook):
    """Kafka admin operations (reassignments, configs, log dirs) on a Kafka provider connection.

    :param kafka_config_id: the Airflow connection id (conn_type ``kafka``)
    """

    hook_name = "Apache Kafka (reassignment admin)"

    def __init__(self, kafka_config_id: str = KafkaBaseHook.default_conn_name, *args: Any, **kwargs: Any) -> None:
        super().__init__(kafka_config_id, *args, **kwargs)

    def get_admin_kwargs(self) -> dict[str, Any]:
        """The connection's extra mapped to KafkaAdminClient kwargs (secrets masked in logs)."""
        conn = self.get_connection(self.kafka_config_id)
        extra = dict(conn.extra_dejson or {})
        # Airflow UI users sometimes type host/port instead of the extra: honour that too.
        if not extra.get("bootstrap.servers") and conn.host:
            extra["bootstrap.servers"] = f"{conn.host}:{conn.port or 9092}"
        if conn.password and not extra.get("sasl.password"):
            extra["sasl.password"] = conn.password
        if conn.login and not extra.get("sasl.username"):
            extra["sasl.username"] = conn.login
        kwargs = librdkafka_to_kafka_python(extra)
        self.log.info("Kafka admin connection %r: %s", self.kafka_config_id, redacted(kwargs))
        return kwargs

    @staticmethod
    def retry_settings() -> dict[str, Any]:
        """Retry budget of admin calls from Airflow config section ``[kafka_reassign]``.

        ``admin_retry_attempts`` (default 5), ``admin_retry_max_seconds`` (default 60) and
        ``admin_bootstrap_timeout_ms`` (default 10000): how long a task keeps trying when Kafka
        is unreachable before it fails. Kept out of the connection extra because the provider's
        own hooks hand that dict to librdkafka, which refuses unknown keys.
        """
        from airflow.sdk import conf

        return {
            "retry_attempts": conf.getint("kafka_reassign", "admin_retry_attempts", fallback=5),
            "retry_max_seconds": conf.getfloat("kafka_reassign", "admin_retry_max_seconds", fallback=60.0),
            "bootstrap_timeout_ms": conf.getint("kafka_reassign", "admin_bootstrap_timeout_ms", fallback=10_000),
        }

    def get_admin(self) -> KafkaAdmin:
        """A connected :class:`kafka_reassign.admin.KafkaAdmin`; close it when done."""
        from kafka_reassign.admin import KafkaAdmin

        return KafkaAdmin(**{**self.retry_settings(), **self.get_admin_kwargs()})

    def test_connection(self) -> tuple[bool, str]:
        """Check from the UI that the cluster answers a metadata request through kafka-python."""
        try:
            admin = self.get_admin()
            try:
                state = admin.cluster_state()
            finally:
                admin.close()
            return True, f"Connected: {len(state.brokers)} brokers, {len(state.topics)} topics."
        except Exception as e:  # the UI shows the message; no secret is in it
            return False, str(e)
