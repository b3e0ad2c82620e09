"""Root fixtures: simulated Kafka clusters for the tests, or a real cluster via KAFKA_BOOTSTRAP.

- ``sim_cluster(snapshot, time_scale=...)``: factory fixture; starts a
  :class:`kafka_sim.SimulatedCluster` and stops it after the test.
- ``small_snapshot``: a deterministic 4-broker, 2-rack snapshot with two topics.
- ``kafka_bootstrap``: bootstrap servers for tests that need no fault injection:
  the ``KAFKA_BOOTSTRAP`` environment variable when set (a real cluster), else a
  simulated cluster of ``small_snapshot``.
"""
from __future__ import annotations

import copy
import os
from typing import Any, Callable, Iterator

import pytest

from sim_snapshots import make_snapshot


@pytest.fixture
def small_snapshot() -> dict:
    """4 brokers over 2 racks; topics ``orders`` (3 x RF3) and ``clicks`` (2 x RF2)."""
    return make_snapshot()


@pytest.fixture
def snapshot_factory() -> Callable[..., dict]:
    """The :func:`make_snapshot` helper, for tests that need a custom layout."""
    return make_snapshot


@pytest.fixture
def sim_cluster() -> Iterator[Callable[..., Any]]:
    """Factory: ``sim_cluster(snapshot, time_scale=1.0, **kw)`` -> started SimulatedCluster."""
    from kafka_sim import SimulatedCluster

    started: list[Any] = []

    def factory(snapshot: dict, time_scale: float = 1.0, **kwargs: Any) -> Any:
        cluster = SimulatedCluster(copy.deepcopy(snapshot), time_scale=time_scale, **kwargs)
        cluster.start()
        started.append(cluster)
        return cluster

    yield factory
    for cluster in reversed(started):
        cluster.stop()


@pytest.fixture
def kafka_bootstrap(sim_cluster: Callable[..., Any], small_snapshot: dict) -> str:
    """Bootstrap servers: $KAFKA_BOOTSTRAP (a real cluster) or a fresh simulated one."""
    real = os.environ.get("KAFKA_BOOTSTRAP")
    if real:
        return real
    return sim_cluster(small_snapshot).bootstrap_servers


@pytest.fixture
def real_kafka() -> bool:
    """True when the tests run against a real cluster (KAFKA_BOOTSTRAP set)."""
    return bool(os.environ.get("KAFKA_BOOTSTRAP"))
