"""Record batch sizes in the snapshot (``batch_bytes``): which partitions are read, the topic's
median for the others, and what a failed read leaves."""
from __future__ import annotations

from typing import Any, Iterable

from kafka_reassign.cluster.batches import BATCH_BYTES, SAMPLED_PER_TOPIC, BatchReader, add_batch_bytes, sampled
from kafka_reassign.cluster.state import TopicPartition

MB = 1_000_000


class FakeReader:
    """A cluster whose logs span ``offsets[tp]`` (start, end) and whose batches are ``sizes[tp]`` bytes (median)."""

    def __init__(self, offsets: dict[TopicPartition, tuple[int, int]], sizes: dict[TopicPartition, float],
                 fail: bool = False) -> None:
        self.offsets, self.sizes, self.fail = offsets, sizes, fail
        self.fetched: list[TopicPartition] = []

    def batch_sizes(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, float]:
        keys = list(partitions)
        self.fetched += keys
        if self.fail:
            raise ConnectionError("broker gone")
        return {k: self.sizes[k] for k in keys if k in self.sizes}

    def list_offsets(self, partitions: Iterable[TopicPartition], latest: bool = True) -> dict[TopicPartition, int]:
        return {k: self.offsets[k][1 if latest else 0] for k in partitions if k in self.offsets}


def snapshot(*topics: tuple[str, list[int], dict[str, str]]) -> dict[str, Any]:
    return {"topics": [{"name": name, "configs": configs,
                        "partitions": [{"partition": i, "size_bytes": s} for i, s in enumerate(sizes)]}
                       for name, sizes, configs in topics]}


def test_only_the_largest_non_empty_partitions_of_plain_topics_are_read():
    snap = snapshot(("plain", [5, 0, 9, 7, 8], {}),
                    ("tiered", [9, 9], {"remote.storage.enable": "true"}))
    snap["topics"].append({"name": "__consumer_offsets", "internal": True, "configs": {},
                           "partitions": [{"partition": 0, "size_bytes": 99}]})
    assert sampled(snap) == [("plain", 2), ("plain", 4), ("plain", 3)][:SAMPLED_PER_TOPIC]


def test_sampled_partitions_get_their_own_size_and_the_topics_others_the_median():
    snap = snapshot(("t", [90 * MB, 80 * MB, 70 * MB, 10 * MB, 0], {}), ("u", [MB], {}))
    reader = FakeReader({("t", 0): (0, 900), ("t", 1): (100, 900), ("t", 2): (0, 700), ("u", 0): (0, 10)},
                        {("t", 0): 900_000.4, ("t", 1): 100_000, ("t", 2): 500_000})
    assert isinstance(reader, BatchReader)
    assert add_batch_bytes(reader, snap) == 1  # "u" answered nothing: no figure, not a guess
    got = [p.get(BATCH_BYTES) for p in snap["topics"][0]["partitions"]]
    # p3 (not sampled) gets the median of the three read; p4 is empty
    assert got == [900_000, 100_000, 500_000, 500_000, None]
    assert BATCH_BYTES not in snap["topics"][1]["partitions"][0]


def test_logs_without_records_are_not_fetched_and_a_failed_read_changes_nothing():
    snap = snapshot(("t", [MB, MB], {}))
    empty = FakeReader({("t", 0): (5, 5), ("t", 1): (0, 0)}, {})
    assert add_batch_bytes(empty, snap) == 0
    assert empty.fetched == []  # a seeded simulator has sizes but no records: no wait for nothing
    broken = FakeReader({("t", 0): (0, 10)}, {("t", 0): 1000}, fail=True)
    assert add_batch_bytes(broken, snap) == 0
    assert all(BATCH_BYTES not in p for p in snap["topics"][0]["partitions"])
