"""What the request handlers share: the runtime protocol, the request context, lookups."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kafka_sim.errors import (
    FENCED_LEADER_EPOCH, NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)

if TYPE_CHECKING:
    from kafka_sim.model import ClusterModel
    from kafka_sim.state import Broker, Partition, Topic

#: The all-zero topic id: "no id" in requests and responses.
ZERO_UUID = uuid.UUID(int=0)


class Runtime(Protocol):
    """What the handlers need from the server side (kept here so handlers never import server)."""

    model: ClusterModel
    endpoints: dict[int, tuple[str, int]]

    def notify(self) -> None:
        """Wake every waiter: state changed."""

    async def wait_change(self, timeout: float) -> None:
        """Sleep until the next tick or state change, at most ``timeout`` seconds."""


@dataclass
class RequestContext:
    """Where a request came from and how it was framed."""

    broker_id: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass
class RawBody:
    """A response body already encoded (the metadata cache hands these out), possibly in parts."""

    body: bytes | list[bytes]
    flexible: bool


class HandlerBase:
    """What every request family's handlers share: the model, the runtime, lookups and leader checks."""

    runtime: Runtime
    model: ClusterModel

    def _alive_brokers(self) -> list[Broker]:
        return [b for _, b in sorted(self.model.brokers.items()) if b.alive]

    def _endpoint(self, broker_id: int) -> tuple[str, int]:
        return self.runtime.endpoints[broker_id]

    def _topic_by_id(self, topic_id: uuid.UUID | None) -> Topic | None:
        for topic in self.model.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def _resolve_topic(self, name: str | None, topic_id: uuid.UUID | None, by_id: bool) -> tuple[Topic | None, int]:
        """Find a topic by name or id; returns (topic or None, error code)."""
        if by_id:
            topic = self._topic_by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
            return topic, (NONE if topic is not None else UNKNOWN_TOPIC_ID)
        topic = self.model.topics.get(name) if name is not None else None
        return topic, (NONE if topic is not None else UNKNOWN_TOPIC_OR_PARTITION)

    def _partition(self, topic: Topic | None, index: int) -> Partition | None:
        if topic is None or index < 0 or index >= len(topic.partitions):
            return None
        return topic.partitions[index]

    def _leader_check(self, broker_id: int, part: Partition | None, current_leader_epoch: int = -1) -> int:
        """Kafka's leader-side checks for client requests on a partition."""
        if part is None:
            return UNKNOWN_TOPIC_OR_PARTITION
        if current_leader_epoch >= 0:
            # KIP-320: a client with an older epoch is fenced, a newer one is ahead of us.
            if current_leader_epoch < part.leader_epoch:
                return FENCED_LEADER_EPOCH
            if current_leader_epoch > part.leader_epoch:
                return UNKNOWN_LEADER_EPOCH
        if part.leader != broker_id:
            return NOT_LEADER_OR_FOLLOWER
        return NONE
