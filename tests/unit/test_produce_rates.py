"""Produce rates laid onto a cluster state (``with_produce_rates``): each partition copied as
``dataclasses.replace`` would copy it, without its cost (once per partition of a large cluster)."""
from __future__ import annotations

from dataclasses import replace

from kafka_reassign.cluster.state import ClusterState, PartitionInfo, TopicInfo, with_produce_rates


def test_partitions_with_a_rate_equal_what_replace_makes_and_the_others_are_kept():
    parts = {i: PartitionInfo("t", i, (1, 2, 3), (1, 2), 1, offline=(3,), size_bytes=100 + i,
                              replica_dirs={1: "/d1", 2: "/d2"}) for i in range(3)}
    state = ClusterState(brokers={}, topics={"t": TopicInfo("t", parts)})
    out = with_produce_rates(state, {("t", 0): 5e5, ("t", 2): 7})
    for i, rate in ((0, 5e5), (2, 7.0)):
        got = out.topics["t"].partitions[i]
        assert got == replace(parts[i], bytes_in_per_sec=rate) and type(got) is PartitionInfo
        assert got.bytes_in_per_sec == rate and parts[i].bytes_in_per_sec == 0  # the original is untouched
    assert out.topics["t"].partitions[1] is parts[1]
