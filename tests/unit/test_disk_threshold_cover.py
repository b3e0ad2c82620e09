"""The disk-threshold goal's replica choice (:func:`min_cover`) against brute force, and its bound."""
from __future__ import annotations

import itertools
import random

import pytest

from kafka_reassign.planning.spark.cluster import Cluster
from kafka_reassign.planning.spark.goals.disk_threshold import disk_threshold_lower_bound, min_cover


def _best(sizes: list[float], need: float) -> float:
    """The least total of a subset covering ``need`` (every subset tried)."""
    return min(sum(c) for k in range(1, len(sizes) + 1) for c in itertools.combinations(sizes, k)
               if sum(c) >= need)


@pytest.mark.parametrize("seed", range(200))
def test_cover_is_within_one_grid_step_per_replica_of_the_best(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [float(int(rng.lognormvariate(10, 1.2))) + 1 for _ in range(rng.randint(1, 11))]
    need = rng.uniform(0.05, 1.0) * sum(sizes)
    pick = min_cover(sizes, need)
    total = sum(sizes[i] for i in pick)
    assert len(set(pick)) == len(pick) and total >= need
    assert total <= _best(sizes, need) + len(pick) * need / 10_000 + 1e-9


def test_one_replica_just_above_beats_many_small_ones() -> None:
    assert min_cover([10.0, 10.0, 10.0, 10.0, 31.0], 30.5) == [4]
    assert sorted(min_cover([10.0, 10.0, 10.0, 40.0], 30.0)) == [0, 1, 2]


def test_nothing_to_cover_or_not_enough() -> None:
    assert min_cover([5.0, 6.0], 0.0) == []
    assert min_cover([5.0, 6.0], 12.0) == []
    pick = min_cover([1e-9] * 5 + [3e-9], 4e-9)
    assert len(set(pick)) == len(pick) and sum(([1e-9] * 5 + [3e-9])[i] for i in pick) == pytest.approx(4e-9)


def test_lower_bound_is_the_excess_of_the_full_dirs() -> None:
    snapshot = {"version": 1, "brokers": [
        {"id": 1, "log_dirs": [{"path": "/a", "capacity_bytes": 100.0}, {"path": "/b", "capacity_bytes": 100.0}]},
        {"id": 2, "log_dirs": [{"path": "/a", "capacity_bytes": 100.0}]}],
        "topics": [{"name": "t", "partitions": [
            {"partition": 0, "replicas": [1, 2], "size_bytes": 90.0, "log_dirs": ["/a", "/a"]},
            {"partition": 1, "replicas": [1], "size_bytes": 30.0, "log_dirs": ["/b"]}]}]}
    # /a on 1 and on 2 hold 90 (10 above 80%); /b holds 30 (under)
    assert disk_threshold_lower_bound(Cluster.from_snapshot(snapshot), 0.8) == pytest.approx(20.0)
