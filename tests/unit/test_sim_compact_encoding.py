"""Hand-encoded response bodies equal kafka-python's encoding of the same response, byte for byte."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import ListPartitionReassignmentsResponse

from kafka_sim.handlers.compact import compact_int32s, compact_string, list_reassignments_body, uvarint


def _reference(rows):
    R = ListPartitionReassignmentsResponse
    TopicR = R.OngoingTopicReassignment
    PartR = TopicR.OngoingPartitionReassignment
    by_topic: dict = {}
    for topic, partition, replicas, adding, removing in rows:
        by_topic.setdefault(topic, []).append(PartR(partition_index=partition, replicas=replicas,
                                                    adding_replicas=adding, removing_replicas=removing))
    return R(version=0, throttle_time_ms=0, error_code=0, error_message=None,
             topics=[TopicR(name=k, partitions=v) for k, v in sorted(by_topic.items())]).encode(version=0)


@pytest.mark.parametrize("rows", [
    [],
    [("t", 0, [4, 2, 3, 1], [4], [1])],
    [("b", 3, [1, 2], [], []), ("a", 0, [5, 6, 1, 2, 3], [5, 6], [1, 2, 3]), ("a", 7, [9], [9], [])],
    [("x" * 200, i, list(range(i % 5 + 1)), [i], [0]) for i in range(130)],  # lengths past one varint byte
])
def test_list_reassignments_body_matches_the_protocol_class(rows):
    assert list_reassignments_body(rows) == _reference(rows)


def test_compact_pieces():
    assert uvarint(0) == b"\x00" and uvarint(127) == b"\x7f" and uvarint(128) == b"\x80\x01"
    assert compact_string(None) == b"\x00" and compact_string("ab") == b"\x03ab"
    assert compact_int32s([]) == b"\x01" and compact_int32s([1]) == b"\x02\x00\x00\x00\x01"
