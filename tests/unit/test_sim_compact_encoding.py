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


class _Runtime:
    def __init__(self, model):
        self.model, self.endpoints = model, {}

    def notify(self):
        pass


def test_listing_kept_between_calls_follows_every_change_of_the_moves():
    """Entries are kept per partition until it changes: each listing equals a fresh encoding."""
    from kafka.protocol.admin import ListPartitionReassignmentsRequest

    from kafka_sim.handlers.base import RequestContext
    from kafka_sim.handlers.dispatch import Handlers

    from test_sim_model_helpers import MB, manual, snapshot, topic

    m = manual(snapshot(topics=[topic(f"t{i}", [[1, 2], [2, 3]], size=(2 + i) * MB) for i in range(3)]))
    handlers = Handlers(_Runtime(m))
    ctx = RequestContext(broker_id=1, api_key=46, api_version=0, correlation_id=1, client_id=None)
    every = ListPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=None)

    def listed():
        body = handlers.list_partition_reassignments(ctx, every).body
        assert body == _reference(m.list_reassignments(None))
        return body

    assert listed() == _reference([])
    m.alter_reassignments([("t0", 0, [4, 2]), ("t1", 1, [2, 4]), ("t2", 0, [1, 5])])
    first = listed()
    m.alter_reassignments([("t1", 1, [3, 5])])  # someone changes a move in flight: its entry changes
    assert listed() != first
    m.alter_reassignments([("t2", 0, None)])  # cancelled: it leaves the listing
    while m.list_reassignments(None):
        m.advance_by(1.0)
        listed()
    assert listed() == _reference([])
