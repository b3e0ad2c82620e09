"""Where a broker config value comes from, and what a config read returns.

Kafka reports a source for every config value (KIP-226): a broker's own dynamic value, the
cluster-wide default, its server.properties... The reassignment writes only per-broker and
per-topic values, but a rate a broker *inherits* still limits it, so reads keep both apart.
Plain data, no Kafka client: the throttle logic imports it too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

#: Kafka's config sources of a broker value in force without a per-broker override.
CLUSTER_DEFAULT = "DYNAMIC_DEFAULT_BROKER_CONFIG"
STATIC_CONFIG = "STATIC_BROKER_CONFIG"
INHERITED_SOURCES = {CLUSTER_DEFAULT: "cluster default", STATIC_CONFIG: "static broker config"}


@dataclass(frozen=True)
class Inherited:
    """A broker config value in force where the broker has no per-broker value of its own.

    :param value: the value
    :param source: Kafka's config source (:data:`CLUSTER_DEFAULT` or :data:`STATIC_CONFIG`)
    """

    value: str
    source: str = CLUSTER_DEFAULT

    @property
    def label(self) -> str:
        """How reports name it: "cluster default" or "static broker config"."""
        return INHERITED_SOURCES.get(self.source, self.source)

    def to_json(self) -> dict[str, str]:
        return {"value": self.value, "source": self.source}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "Inherited | None":
        return None if not d else cls(value=str(d["value"]), source=str(d.get("source", CLUSTER_DEFAULT)))


class ConfigChangeLike(Protocol):
    """What :meth:`~kafka_reassign.cluster.admin.KafkaAdmin.alter_configs` needs of a change (a throttle ConfigChange)."""

    @property
    def resource_type(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> str | None: ...


@dataclass
class ConfigsRead:
    """Dynamic config values read, and the resources that could not be read.

    :param values: {("broker", "1"): {key: value or None}, ("topic", "t"): {...}}
    :param unreachable: {(resource_type, name): error} of resources not read
    :param inherited: {("broker", "1"): {key: Inherited}}: values a broker enforces without a
        per-broker value of its own (the cluster-wide default, or its static config)
    """

    values: dict[tuple[str, str], dict[str, str | None]]
    unreachable: dict[tuple[str, str], str]
    inherited: dict[tuple[str, str], dict[str, Inherited]] = field(default_factory=dict)

