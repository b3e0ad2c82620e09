"""A simulated multi-broker Kafka cluster that speaks the Kafka wire protocol.

``SimulatedCluster`` (server side, :mod:`kafka_sim.server`) serves a
``ClusterModel`` (state and physics, :mod:`kafka_sim.model`) over TCP. Both are
imported lazily so that ``import kafka_sim.model`` stays free of socket code.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_sim.model import ClusterModel
    from kafka_sim.server import SimulatedCluster

__all__ = ["SimulatedCluster", "ClusterModel"]


def __getattr__(name: str) -> Any:
    if name == "SimulatedCluster":
        from kafka_sim.server import SimulatedCluster
        return SimulatedCluster
    if name == "ClusterModel":
        from kafka_sim.model import ClusterModel
        return ClusterModel
    raise AttributeError(f"module 'kafka_sim' has no attribute {name!r}")
