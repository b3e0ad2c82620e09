"""A hook that turns the Kafka provider's connection into a kafka-python admin client.

The Kafka provider's connection (``conn_type`` ``kafka``) keeps a librdkafka config dict in its
extra, because the provider's own hooks use confluent-kafka. confluent-kafka has no
reassignment, log-dir or ListPartitionReassignments calls, so this hook maps the same dict to
kafka-python's ``KafkaAdminClient`` keyword arguments and hands them to
:class:`kafka_reassign.cluster.admin.KafkaAdmin`, the one class that talks to Kafka.

Either connection type works: the Kafka provider's ``kafka`` (config dict in the extra) or this
provider's ``kafka_reassign`` (bootstrap servers in host, SASL user/password in login/password,
the rest of the config in the extra). The mapping, with every auth mechanism, is
:func:`kafka_reassign.cluster.auth.client_kwargs`.

Secrets (SASL password, SSL key password) are registered with Airflow's secrets masker as
soon as they are read and never appear in log lines, XComs or trigger kwargs: triggers carry
the connection id, not the config.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

if TYPE_CHECKING:
    from kafka_reassign.cluster.admin import KafkaAdmin


def _mask(value: Any) -> None:
    """Register a secret with Airflow's masker so it is redacted wherever it is logged."""
    if not value:
        return
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover - older Task SDKs
        return
    mask_secret(str(value))


def librdkafka_to_kafka_python(config: dict[str, Any], callback_allowlist: Any = ()) -> dict[str, Any]:
    """Map a Kafka connection's extra (a librdkafka config dict) to KafkaAdminClient kwargs.

    Secrets are registered with the log masker first. The mapping itself is
    :func:`kafka_reassign.cluster.auth.client_kwargs`, shared with the CLI.

    :param config: the connection extra, e.g. ``{"bootstrap.servers": "b1:9092,b2:9092",
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", ...}``
    :param callback_allowlist: dotted paths an ``oauth_cb`` may name
    :raises ValueError: when bootstrap.servers is missing or a setting cannot be used
    """
    from kafka_reassign.cluster.auth import SECRET_KEYS, client_kwargs

    for key in SECRET_KEYS:
        _mask(config.get(key))
    kwargs = client_kwargs(config, callback_allowlist=callback_allowlist)
    if not kwargs.get("bootstrap_servers"):
        raise ValueError("the Kafka connection's extra has no 'bootstrap.servers'")
    return kwargs


def redacted(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A copy of admin kwargs that is safe to log (secrets replaced by ``***``)."""
    from kafka_reassign.cluster.admin import redact

    return redact(kwargs)


class KafkaAdminHook(KafkaBaseHook):
    """Kafka admin operations (reassignments, configs, log dirs) on a Kafka provider connection.

    :param kafka_config_id: the Airflow connection id (conn_type ``kafka``)
    """

    conn_type = "kafka_reassign"
    hook_name = "Apache Kafka (reassignment admin)"

    def __init__(self, kafka_config_id: str = KafkaBaseHook.default_conn_name, *args: Any, **kwargs: Any) -> None:
        super().__init__(kafka_config_id, *args, **kwargs)

    def get_admin_kwargs(self) -> dict[str, Any]:
        """The connection's extra mapped to KafkaAdminClient kwargs (secrets masked in logs)."""
        conn = self.get_connection(self.kafka_config_id)
        extra = dict(conn.extra_dejson or {})
        # Airflow UI users sometimes type host/port instead of the extra: honour that too.
        if not extra.get("bootstrap.servers") and conn.host:
            # The kafka_reassign connection form takes "b1:9092,b2:9092" in host.
            host = str(conn.host)
            extra["bootstrap.servers"] = host if ":" in host or "," in host else f"{host}:{conn.port or 9092}"
        if conn.password and not extra.get("sasl.password"):
            extra["sasl.password"] = conn.password
        if conn.login and not extra.get("sasl.username"):
            extra["sasl.username"] = conn.login
        kwargs = librdkafka_to_kafka_python(extra, self._get_callback_allowlist())
        self.log.debug("Kafka admin connection %r: %s", self.kafka_config_id, redacted(kwargs))
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

    @staticmethod
    def client_log_level() -> str:
        """``[kafka_reassign] kafka_client_log_level`` (default WARNING): kafka-python's log level."""
        from airflow.sdk import conf

        return conf.get("kafka_reassign", "kafka_client_log_level", fallback="WARNING")

    def get_admin(self) -> KafkaAdmin:
        """A connected :class:`kafka_reassign.cluster.admin.KafkaAdmin`; close it when done."""
        from kafka_reassign.cluster.admin import KafkaAdmin
        from kafka_reassign.cluster.client_logs import set_client_log_level

        set_client_log_level(self.client_log_level())

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
