"""Raw wire checks: framing, request/response header versions, ApiVersions fallback.

These speak bytes over a socket (no client library logic in between), so they pin
down exactly what goes on the wire.
"""
from __future__ import annotations

import socket
import struct
from typing import Any

import pytest

pytest.importorskip("kafka")
from kafka.protocol.metadata import (  # noqa: E402
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
)

pytestmark = pytest.mark.timeout(60)


def _roundtrip(addr: tuple[str, int], payload: bytes) -> bytes:
    with socket.create_connection(addr, timeout=5) as s:
        s.sendall(payload)
        size = struct.unpack(">i", _recv(s, 4))[0]
        return _recv(s, size)


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _request(req: Any, version: int, correlation_id: int) -> bytes:
    req.API_VERSION = version
    req.with_header(correlation_id=correlation_id, client_id="raw-test")
    return req.encode(header=True, framed=True)


def test_api_versions_v3_flexible_request_header_v0_response_header(sim_cluster: Any,
                                                                   small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    addr = cluster.endpoints[1]
    req = ApiVersionsRequest(client_software_name="raw", client_software_version="1.0")
    body = _roundtrip(addr, _request(req, 3, 77))
    # Response header v0 even for flexible ApiVersions: correlation id, then the body.
    assert struct.unpack(">i", body[:4])[0] == 77
    resp = ApiVersionsResponse.decode(body[4:], version=3)
    assert resp.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[18] == (0, 4)
    assert ranges[3] == (0, 13)          # Metadata
    assert ranges[1][1] >= 17            # Fetch with topic ids
    assert ranges[45][0] == 0 and 46 in ranges and 35 in ranges and 34 in ranges
    assert 60 in ranges                  # DescribeCluster


def test_api_versions_too_new_gets_v0_error_reply(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    addr = cluster.endpoints[2]
    # A v9 ApiVersions request from a future client: header v2 (tagged fields) + empty body.
    client_id = b"future"
    header = struct.pack(">hhih", 18, 9, 5, len(client_id)) + client_id + b"\x00"
    body = b"\x00\x00\x00"  # compact strings (empty) + no tagged fields
    frame = header + body
    raw = _roundtrip(addr, struct.pack(">i", len(frame)) + frame)
    assert struct.unpack(">i", raw[:4])[0] == 5
    resp = ApiVersionsResponse.decode(raw[4:], version=0)
    assert resp.error_code == 35  # UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]


def test_api_versions_v0(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    raw = _roundtrip(cluster.endpoints[1], _request(ApiVersionsRequest(), 0, 1))
    resp = ApiVersionsResponse.decode(raw[4:], version=0)
    assert resp.error_code == 0 and len(resp.api_keys) >= 15


def test_flexible_metadata_response_header_has_tagged_fields(sim_cluster: Any,
                                                             small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    req = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
    raw = _roundtrip(cluster.endpoints[3], _request(req, 12, 42))
    assert struct.unpack(">i", raw[:4])[0] == 42
    assert raw[4] == 0  # response header v1: empty tagged-field section
    resp = MetadataResponse.decode(raw[5:], version=12)
    assert resp.cluster_id == cluster.model.cluster_id
    assert {b.node_id: b.rack for b in resp.brokers} == {1: "rack-0", 2: "rack-1", 3: "rack-0",
                                                         4: "rack-1"}
    orders = next(t for t in resp.topics if t.name == "orders")
    assert orders.topic_id.int != 0
    p = sorted(orders.partitions, key=lambda x: x.partition_index)
    assert [(x.leader_id, list(x.replica_nodes)) for x in p] == [
        (1, [1, 2, 3]), (2, [2, 3, 4]), (3, [3, 4, 1])]
    assert all(x.leader_epoch >= 0 for x in p)


def test_metadata_unknown_topic_is_not_auto_created(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    T = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(topics=[T(name="no-such-topic")], allow_auto_topic_creation=True)
    raw = _roundtrip(cluster.endpoints[1], _request(req, 9, 3))
    resp = MetadataResponse.decode(raw[5:], version=9)
    (t,) = resp.topics
    assert t.error_code == 3 and t.partitions == []
    assert "no-such-topic" not in cluster.model.topics


def test_unsupported_api_closes_connection(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    # JoinGroup (11) is not implemented: Kafka-style, the connection is closed.
    frame = struct.pack(">hhih", 11, 5, 1, 1) + b"x"
    with socket.create_connection(cluster.endpoints[1], timeout=5) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        assert s.recv(4) == b""


def _full_metadata(addr: tuple[str, int], correlation_id: int) -> Any:
    req = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    raw = _roundtrip(addr, _request(req, 12, correlation_id))
    return MetadataResponse.decode(raw[5:], version=12)


def test_cached_full_metadata_follows_state_changes(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    addr = cluster.endpoints[1]
    first = _full_metadata(addr, 1)
    assert _full_metadata(addr, 2).topics == first.topics  # served from the cache
    cluster.stop_broker(2)
    after = _full_metadata(addr, 3)
    assert sorted(b.node_id for b in after.brokers) == [1, 3, 4]
    p1 = next(p for t in after.topics if t.name == "orders" for p in t.partitions
              if p.partition_index == 1)
    assert 2 not in p1.isr_nodes and p1.leader_id in (3, 4) and list(p1.offline_replicas) == [2]
    assert p1.leader_epoch > 0
    with cluster.model.lock:
        code, _msg = cluster.model.create_topic("fresh", 2, 2, None, {}, False)
    assert code == 0
    names = {t.name for t in _full_metadata(addr, 4).topics}
    assert "fresh" in names


def test_requested_topics_metadata_matches_the_full_answer_and_follows_changes(sim_cluster: Any,
                                                                              small_snapshot: dict) -> None:
    # The requested-topics answer is assembled from the same cached per-topic bytes as the full one.
    cluster = sim_cluster(small_snapshot)
    addr = cluster.endpoints[1]
    T = MetadataRequest.MetadataRequestTopic
    for version, cid in ((9, 10), (12, 20)):
        full = {t.name: t for t in MetadataResponse.decode(
            _roundtrip(addr, _request(MetadataRequest(topics=None, allow_auto_topic_creation=False), version, cid)
                       )[5:], version=version).topics}
        req = MetadataRequest(topics=[T(name="orders"), T(name="nope"), T(name="clicks")],
                              allow_auto_topic_creation=False)
        resp = MetadataResponse.decode(_roundtrip(addr, _request(req, version, cid + 1))[5:], version=version)
        assert [t.name for t in resp.topics] == ["orders", "nope", "clicks"]
        assert resp.topics[0] == full["orders"] and resp.topics[2] == full["clicks"]
        assert resp.topics[1].error_code == 3 and resp.topics[1].partitions == []
        assert sorted(b.node_id for b in resp.brokers) == sorted(b.node_id for b in MetadataResponse.decode(
            _roundtrip(addr, _request(MetadataRequest(topics=[], allow_auto_topic_creation=False), version, cid + 2)
                       )[5:], version=version).brokers)
    cluster.stop_broker(2)
    req = MetadataRequest(topics=[T(name="orders")], allow_auto_topic_creation=False)
    (orders,) = MetadataResponse.decode(_roundtrip(addr, _request(req, 12, 30))[5:], version=12).topics
    p1 = next(p for p in orders.partitions if p.partition_index == 1)
    assert 2 not in p1.isr_nodes and p1.leader_id in (3, 4) and list(p1.offline_replicas) == [2]


def _batch(values: list[bytes], producer_id: int = -1, base_sequence: int = -1) -> bytearray:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=base_sequence, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=v, headers=[])
    return bytearray(b.build())


def _produce(addr: tuple[str, int], records: bytes, correlation_id: int, acks: int = -1) -> Any:
    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000,
                         topic_data=[T(name="clicks", partition_data=[P(index=0, records=bytes(records))])])
    raw = _roundtrip(addr, _request(req, 9, correlation_id))
    return ProduceResponse.decode(raw[5:], version=9).responses[0].partition_responses[0]


def test_produce_checks_crc_and_leadership(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    leader = cluster.endpoints[1]          # clicks-0 replicas [1, 2], leader 1
    good = _batch([b"a", b"b", b"c"])
    r = _produce(leader, good, 1)
    assert (r.error_code, r.base_offset) == (0, 0)
    bad = bytearray(good)
    bad[-1] ^= 0xFF                        # flip a payload byte: CRC no longer matches
    assert _produce(leader, bad, 2).error_code == 2  # CORRUPT_MESSAGE
    assert _produce(cluster.endpoints[2], good, 3).error_code == 6  # NOT_LEADER_OR_FOLLOWER
    r = _produce(leader, _batch([b"d"]), 4)
    assert (r.error_code, r.base_offset) == (0, 3)


def test_idempotent_retry_is_deduplicated(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    leader = cluster.endpoints[1]
    first = _batch([b"x", b"y"], producer_id=4242, base_sequence=0)
    assert _produce(leader, first, 1).base_offset == 0
    # The same batch again (a retry after a lost response) gets the original offset.
    r = _produce(leader, first, 2)
    assert (r.error_code, r.base_offset) == (0, 0)
    # A gap in the sequence is refused.
    assert _produce(leader, _batch([b"z"], producer_id=4242, base_sequence=5), 3).error_code == 45
    r = _produce(leader, _batch([b"z"], producer_id=4242, base_sequence=2), 4)
    assert (r.error_code, r.base_offset) == (0, 2)
    assert cluster.partition_state("clicks", 0)["high_watermark"] == 3
