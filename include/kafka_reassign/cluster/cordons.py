"""Cordoned log dirs (KIP-1066, Kafka 4.3+): what the broker config means, and whether a cluster has them.

``cordoned.log.dirs`` is a per-broker dynamic config (IncrementalAlterConfigs on a BROKER
resource): a comma-separated list of the broker's log dirs, or ``*`` for all of them. Kafka
places no new partition on a cordoned dir, and the controller's replica placer skips a broker
whose dirs are all cordoned ("All brokers are currently fenced, or have all their log
directories cordoned"). Replicas already there stay. DescribeLogDirs v5 reports ``IsCordoned``
per dir. The controller refuses the config below metadata.version 4.3-IV0, even on 4.3 brokers.
Plain data and one read of the bootstrap ApiVersions: no writes here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol, runtime_checkable

#: The broker config (Kafka's ServerLogConfigs.CORDONED_LOG_DIRS_CONFIG).
CORDONED_LOG_DIRS = "cordoned.log.dirs"
#: Its value for "every log dir of the broker".
CORDON_ALL = "*"
#: DescribeLogDirs: version 5 adds IsCordoned (Kafka 4.3).
DESCRIBE_LOG_DIRS_API = 35
CORDON_LOG_DIRS_VERSION = 5
OLDER_CLUSTER_NOTE = ("this cluster does not support cordons (KIP-1066 needs Kafka 4.3+ brokers with "
                      "metadata.version 4.3-IV0 or later): nothing is cordoned, new topics may still land "
                      "on the brokers being drained")


def cordoned_dirs(value: str | None, log_dirs: Iterable[str]) -> frozenset[str]:
    """The dirs a ``cordoned.log.dirs`` value cordons.

    :param value: the config value (None or "" = none)
    :param log_dirs: the broker's log dirs (what ``*`` stands for)
    """
    entries = {e.strip() for e in (value or "").split(",") if e.strip()}
    if CORDON_ALL in entries:
        return frozenset(log_dirs)
    return frozenset(entries)


def cordon_value(current: str | None, log_dirs: Iterable[str], add: Iterable[str] | None) -> str:
    """The value that cordons ``add`` on top of ``current`` (``*`` when every dir ends up cordoned).

    :param current: the value in force now (the broker's own, else the inherited one)
    :param log_dirs: the broker's log dirs
    :param add: dirs to cordon; None = all of them
    """
    all_dirs = list(log_dirs)
    if add is None:
        return CORDON_ALL
    wanted = cordoned_dirs(current, all_dirs) | set(add)
    if all_dirs and wanted >= set(all_dirs):
        return CORDON_ALL
    return ",".join(sorted(wanted))


@runtime_checkable
class ApiVersionReader(Protocol):
    """An admin that can say which request versions the brokers support (KafkaAdmin can)."""

    def max_api_version(self, api_key: int) -> int | None: ...


@dataclass(frozen=True)
class CordonSupport:
    """Whether the cluster can cordon, and the one line saying why not.

    :param supported: True (Kafka 4.3+ brokers), False (older), None (not known: the write tells)
    :param note: for reports and the CLI; empty when supported
    """

    supported: bool | None
    note: str = ""


def cordon_support(admin: object) -> CordonSupport:
    """Read from the bootstrap ApiVersions (no request): DescribeLogDirs v5 means a Kafka 4.3+ broker.

    The metadata.version gate is only known by trying: a cordon write is first sent with
    ``validate_only`` (see :func:`kafka_reassign.throttle.cordon.cordon_brokers`).
    """
    if not isinstance(admin, ApiVersionReader):
        return CordonSupport(None, "cordon support not known for this admin")
    version = admin.max_api_version(DESCRIBE_LOG_DIRS_API)
    if version is None:
        return CordonSupport(None, "cordon support not known (no ApiVersions answer)")
    if version < CORDON_LOG_DIRS_VERSION:
        return CordonSupport(False, OLDER_CLUSTER_NOTE)
    return CordonSupport(True)
