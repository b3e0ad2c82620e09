"""What Kafka's DescribeCluster and Metadata answers hold, as plain data.

:class:`~kafka_reassign.cluster.admin.KafkaAdmin` builds these from kafka-python's responses;
:class:`~kafka_reassign.cluster.state.ClusterState` is assembled from them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerNode:
    """A broker of DescribeCluster.

    :param fenced: registered but fenced by the controller (KRaft): not alive
    """

    id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False


@dataclass(frozen=True)
class ClusterDescription:
    """DescribeCluster: the cluster id, the controller and the registered brokers."""

    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerNode, ...]

    @property
    def alive(self) -> dict[int, BrokerNode]:
        """Brokers not fenced, by id."""
        return {b.id: b for b in self.brokers if not b.fenced}


@dataclass(frozen=True)
class PartitionMetadata:
    """One partition of a Metadata response (replicas with the preferred leader first)."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicMetadata:
    """One topic of a Metadata response.

    :param error: Kafka error name (e.g. UNKNOWN_TOPIC_OR_PARTITION), None when fine
    """

    name: str
    partitions: tuple[PartitionMetadata, ...]
    internal: bool = False
    error: str | None = None
