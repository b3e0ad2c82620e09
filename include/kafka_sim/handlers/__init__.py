"""Request handlers of the simulated broker: decoded request in, response object out.

One :class:`Handlers` instance serves every broker of a cluster; each call carries
the id of the broker the request arrived at, so leader-only APIs (Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch) answer NOT_LEADER_OR_FOLLOWER like Kafka, while
admin APIs are accepted on every broker (KRaft brokers forward them to the
controller). All state lives in the :class:`~kafka_sim.model.ClusterModel`; these
modules translate between the wire structures and the model's plain values, one
module per request family (:mod:`.metadata`, :mod:`.produce`, :mod:`.fetch`,
:mod:`.topic_admin`, :mod:`.replica_admin`) over the shared lookups of :mod:`.base`.
"""
from __future__ import annotations

from kafka_sim.handlers.base import RawBody, RequestContext, Runtime
from kafka_sim.handlers.dispatch import Handlers

__all__ = ["Handlers", "RawBody", "RequestContext", "Runtime"]
