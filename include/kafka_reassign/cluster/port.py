"""The admin port: what the domain asks of a Kafka cluster, typed with the domain's own data.

Domain code takes a :class:`KafkaAdminPort` (or only its read side, :class:`ClusterReader`),
never a kafka-python object. :class:`~kafka_reassign.cluster.admin.KafkaAdmin` implements it
over kafka-python; :class:`~kafka_reassign.planning.preflight.SnapshotView` implements the read
side over a snapshot file (offline ``validate --snapshot``); tests wrap a KafkaAdmin to inject
faults. Per-partition errors of batch writes are returned as Kafka error names (None = done);
a failed request raises :class:`~kafka_reassign.errors.KafkaAdminError`.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Protocol, runtime_checkable

from kafka_reassign.cluster.config_source import ConfigChangeLike, ConfigsRead
from kafka_reassign.cluster.metadata import ClusterDescription, PartitionMetadata, TopicMetadata
from kafka_reassign.cluster.state import ClusterState, InFlight, ReplicaLogDir, TopicPartition
from kafka_reassign.cluster.tiered import TieredOffsets

#: {(resource_type "broker"|"topic", name): {key: value, None = not set}}
ConfigValues = dict[tuple[str, str], dict[str, str | None]]
#: {(topic, partition, broker): absolute log dir}
LogDirMoves = Mapping[tuple[str, int, int], str]


@runtime_checkable
class ClusterReader(Protocol):
    """The reads an offline check needs: the cluster state and the dynamic configs."""

    def cluster_state(self, include_log_dirs: bool = True, topics: list[str] | None = None) -> ClusterState:
        """Brokers, topics, in-flight moves (and sizes and log dirs with ``include_log_dirs``)."""
        ...

    def describe_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> ConfigValues:
        """Per-broker and per-topic dynamic values (every key of ``keys`` present, None = not set)."""
        ...

    def describe_sourced(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> ConfigsRead:
        """Like :meth:`describe_configs`, plus the broker values inherited from defaults."""
        ...


@runtime_checkable
class TieredReader(Protocol):
    """The offsets that size a tiered partition's remote part (a live cluster's; a snapshot has its sizes)."""

    def tiered_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, TieredOffsets]:
        """Log-start, earliest-local and log-end offsets; a partition not answered is left out."""
        ...


@runtime_checkable
class KafkaAdminPort(ClusterReader, TieredReader, Protocol):
    """Every admin operation the reassignment uses, reads and writes."""

    def close(self) -> None: ...

    def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the controller and every registered broker."""
        ...

    def topic_metadata(self, topics: list[str] | None = None) -> list[TopicMetadata]:
        """Metadata of ``topics`` (all when None)."""
        ...

    def partition_metadata(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionMetadata]:
        """Metadata of these partitions (absent: the partition does not exist)."""
        ...

    def read_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                     keys: Iterable[str] | None = None) -> ConfigsRead:
        """Like :meth:`describe_sourced`, but an unreadable resource is listed, not raised."""
        ...

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, InFlight]:
        """Ongoing reassignments (all, or of ``partitions``)."""
        ...

    def describe_log_dirs(self, broker_ids: Iterable[int] | None = None,
                          partitions: Iterable[TopicPartition] | Mapping[int, Iterable[TopicPartition]] | None = None
                          ) -> list[ReplicaLogDir]:
        """DescribeLogDirs rows of the brokers that answered (default: every live broker)."""
        ...

    def list_offsets(self, partitions: Iterable[TopicPartition], latest: bool = True) -> dict[TopicPartition, int]:
        """Log-end (or log-start) offsets; a partition whose leader errs is left out."""
        ...

    def alter_configs(self, changes: Iterable[ConfigChangeLike], validate_only: bool = False) -> None:
        """SET each change's value, or DELETE it when None."""
        ...

    def alter_partition_reassignments(self, targets: Mapping[TopicPartition, Iterable[int] | None]
                                      ) -> dict[TopicPartition, str | None]:
        """Start (replica list) or cancel (None) reassignments."""
        ...

    def alter_replica_log_dirs(self, moves: LogDirMoves) -> dict[tuple[str, int, int], str | None]:
        """Move replicas between log dirs of their broker (KIP-113)."""
        ...

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]:
        """Preferred leader election; ELECTION_NOT_NEEDED counts as success."""
        ...


__all__ = ["ClusterReader", "KafkaAdminPort", "TieredReader", "ConfigValues", "LogDirMoves"]
