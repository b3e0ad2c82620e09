"""Record batch sizes in the snapshot (``batch_bytes``): the formula, which partitions are read and
what a failed read leaves."""
from __future__ import annotations

from typing import Any, Iterable

from kafka_reassign.cluster.batches import (BATCH_BYTES, SAMPLED_PER_TOPIC, BatchReader, add_batch_bytes,
                                            measured_batch_bytes, sampled)
from kafka_reassign.cluster.state import TopicPartition

MB = 1_000_000


class FakeReader:
    """A cluster whose logs hold ``records`` records each, ``first[tp]`` of them per batch (median)."""

    def __init__(self, records: dict[TopicPartition, tuple[int, int]], first: dict[TopicPartition, float],
                 fail: bool = False) -> None:
        self.records, self.first, self.fail = records, first, fail
        self.fetched: list[TopicPartition] = []

    def batch_records(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, float]:
        keys = list(partitions)
        self.fetched += keys
        if self.fail:
            raise ConnectionError("broker gone")
        return {k: self.first[k] for k in keys if k in self.first}

    def list_offsets(self, partitions: Iterable[TopicPartition], latest: bool = True) -> dict[TopicPartition, int]:
        return {k: self.records[k][1 if latest else 0] for k in partitions if k in self.records}


def snapshot(*topics: tuple[str, list[int], dict[str, str]]) -> dict[str, Any]:
    return {"topics": [{"name": name, "configs": configs,
                        "partitions": [{"partition": i, "size_bytes": s} for i, s in enumerate(sizes)]}
                       for name, sizes, configs in topics]}


def test_batch_bytes_are_the_first_batchs_records_times_bytes_per_record():
    # 90 MB in 900 records of 100 kB: a first batch of 9 records is 0.9 MB on disk
    assert measured_batch_bytes(90 * MB, 900, 9) == 900_000
    # a log of one short batch: the whole log
    assert measured_batch_bytes(50_000, 5, 9) == 50_000
    for size, records, first in ((0, 10, 1), (MB, 0, 1), (MB, 10, 0)):
        assert measured_batch_bytes(size, records, first) is None


def test_only_the_largest_non_empty_partitions_of_plain_topics_are_read():
    snap = snapshot(("plain", [5, 0, 9, 7, 8], {}),
                    ("tiered", [9, 9], {"remote.storage.enable": "true"}))
    snap["topics"].append({"name": "__consumer_offsets", "internal": True, "configs": {},
                           "partitions": [{"partition": 0, "size_bytes": 99}]})
    assert sampled(snap) == [("plain", 2), ("plain", 4), ("plain", 3)][:SAMPLED_PER_TOPIC]


def test_sampled_partitions_get_their_own_size_and_the_topics_others_the_median():
    snap = snapshot(("t", [90 * MB, 80 * MB, 70 * MB, 10 * MB, 0], {}))
    reader = FakeReader({("t", 0): (0, 900), ("t", 1): (100, 900), ("t", 2): (0, 700)},
                        {("t", 0): 9, ("t", 1): 9, ("t", 2): 1})
    assert isinstance(reader, BatchReader)
    assert add_batch_bytes(reader, snap) == 1
    got = [p.get(BATCH_BYTES) for p in snap["topics"][0]["partitions"]]
    # p1: 80 MB over 800 records, 9 per batch; p2: one 100 kB record per batch; p3 the median; p4 is empty
    assert got == [900_000, 900_000, 100_000, 900_000, None]


def test_logs_without_records_are_not_fetched_and_a_failed_read_changes_nothing():
    snap = snapshot(("t", [MB, MB], {}))
    empty = FakeReader({("t", 0): (5, 5), ("t", 1): (0, 0)}, {})
    assert add_batch_bytes(empty, snap) == 0
    assert empty.fetched == []  # a seeded simulator has sizes but no records: no wait for nothing
    broken = FakeReader({("t", 0): (0, 10)}, {("t", 0): 1}, fail=True)
    assert add_batch_bytes(broken, snap) == 0
    assert all(BATCH_BYTES not in p for p in snap["topics"][0]["partitions"])
