"""Cordoned log dirs (KIP-1066, Kafka 4.3 with metadata.version 4.3-IV0 or later).

``cordoned.log.dirs`` is a per-broker dynamic config (or a static one in the broker's
properties): a list of the broker's log dirs, or ``*`` for all of them. What Kafka does with it,
and what this model does the same way:

- the controller's replica placement leaves out a broker whose dirs are all cordoned
  (``ClusterControlManager`` hands the placer only brokers whose
  ``BrokerRegistration.hasUncordonedDirs()`` holds; metadata/.../BrokerRegistration.java);
  with too few brokers left, CreateTopics and CreatePartitions fail with
  INVALID_REPLICATION_FACTOR and the placer's message;
- the broker picks no cordoned dir for a new replica (``LogManager.nextLogDirs``), and
  AlterReplicaLogDirs into a cordoned dir fails with INVALID_REPLICA_ASSIGNMENT
  (``CordonedLogDirsIntegrationTest.testReassignWithCordonedLogDirs``);
- a manual assignment or a reassignment target naming a cordoned broker is not refused;
- DescribeLogDirs v5 reports ``IsCordoned`` per dir.

Below metadata.version 4.3-IV0 (``cordons_enabled`` False: a 4.1 cluster) none of this applies
and the dynamic config is refused (``testFeatureNotEnabled``).
"""
from __future__ import annotations

from typing import Iterable

from kafka_sim.config_resolution import BrokerConfigState
from kafka_sim.state import Broker

#: The broker config (Kafka's ServerLogConfigs.CORDONED_LOG_DIRS_CONFIG).
CORDONED_LOG_DIRS = "cordoned.log.dirs"
#: DescribeLogDirs: v5 adds IsCordoned.
DESCRIBE_LOG_DIRS_KEY = 35
CORDON_VERSION = 5


def cordoned_paths(value: str | None, log_dirs: Iterable[str]) -> frozenset[str]:
    """The dirs a ``cordoned.log.dirs`` value cordons (``*`` = all of ``log_dirs``).

    :param value: the config value in force (None or "" = none)
    :param log_dirs: the broker's log dirs
    """
    entries = {e.strip() for e in (value or "").split(",") if e.strip()}
    dirs = list(log_dirs)
    return frozenset(dirs) if "*" in entries else frozenset(e for e in entries if e in dirs)


def placement_failure(replication_factor: int, usable: int) -> str:
    """The placer's refusal when too few brokers can take a replica (Kafka 4.3 wording)."""
    if usable == 0:
        return "All brokers are currently fenced, or have all their log directories cordoned."
    return (f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
            f"of {replication_factor} cannot be reached because only {usable} broker(s) are registered or some "
            "brokers have all their log directories cordoned.")


class Cordons:
    """Mixin of ClusterModel: which dirs and brokers are cordoned, from the broker configs."""

    brokers: dict[int, Broker]
    configs: BrokerConfigState
    #: KIP-1066 in force (metadata.version 4.3-IV0+); False acts as a Kafka 4.1 cluster
    cordons_enabled: bool = True

    def cordoned_dirs(self, broker_id: int) -> frozenset[str]:
        """The cordoned log dirs of one broker (none when cordons are not enabled).

        :param broker_id: the broker
        """
        broker = self.brokers.get(broker_id)
        if broker is None or not self.cordons_enabled:
            return frozenset()
        return cordoned_paths(self.configs.value(broker_id, CORDONED_LOG_DIRS), broker.dir_paths())

    def fully_cordoned(self, broker_id: int) -> bool:
        """True when every log dir of the broker is cordoned (hasUncordonedDirs() is false).

        :param broker_id: the broker
        """
        broker = self.brokers.get(broker_id)
        return broker is not None and self.cordoned_dirs(broker_id) >= set(broker.dir_paths())

    def placeable_brokers(self) -> list[tuple[int, str | None]]:
        """(id, rack) of the live brokers the controller places new replicas on."""
        return [(b.id, b.rack) for b in self.brokers.values() if b.alive and not self.fully_cordoned(b.id)]
