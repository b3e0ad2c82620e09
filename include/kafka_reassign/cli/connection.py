"""How the ``kafka-reassign`` commands reach the cluster: the connection flags and the
``--command-config`` client properties file."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_reassign.cluster.admin import KafkaAdmin


class BadInput(Exception):
    """A command-line value that cannot be used (exit 2)."""


def properties_to_admin_kwargs(props: dict[str, str]) -> dict[str, Any]:
    """Map Kafka client properties (as in kafka-*.sh --command-config) to kafka-python kwargs.

    :param props: e.g. {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", ...}
    """
    from kafka_reassign.cluster.auth import AuthConfigError, client_kwargs

    try:
        # The file is the user's own: an oauth_cb it names is trusted (no allowlist).
        return client_kwargs(props, callback_allowlist=None, strict=True)
    except AuthConfigError as exc:
        raise BadInput(f"--command-config: {exc}") from None


def _read_properties(path: str) -> dict[str, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot read --command-config {path}: {exc.strerror or exc}") from None
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        k, sep, v = line.partition("=")
        if not sep:
            raise BadInput(f"--command-config {path}: not a key=value line: {line!r}")
        props[k.strip()] = v.strip()
    return props


def admin_from_args(args: argparse.Namespace) -> KafkaAdmin:
    """A connected :class:`KafkaAdmin` from --bootstrap-server, --command-config and --connect-timeout."""
    from kafka_reassign.cluster.admin import KafkaAdmin

    kwargs: dict[str, Any] = {}
    if getattr(args, "command_config", None):
        kwargs.update(properties_to_admin_kwargs(_read_properties(args.command_config)))
    if args.bootstrap_server:
        kwargs["bootstrap_servers"] = args.bootstrap_server
    kwargs["bootstrap_timeout_ms"] = int(args.connect_timeout * 1000)
    if not kwargs.get("bootstrap_servers"):
        raise BadInput("--bootstrap-server is required")
    return KafkaAdmin(**kwargs)
