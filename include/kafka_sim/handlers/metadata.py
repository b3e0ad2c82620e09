"""Handlers of cluster-describing requests: ApiVersions, Metadata, DescribeCluster, FindCoordinator."""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorResponse, MetadataResponse

from kafka_sim.apiversions import SUPPORTED
from kafka_sim.errors import (
    COORDINATOR_NOT_AVAILABLE, INVALID_TOPIC_EXCEPTION, LEADER_NOT_AVAILABLE, NONE,
    UNSUPPORTED_ENDPOINT_TYPE, UNSUPPORTED_VERSION,
)
from kafka_sim.handlers.base import ZERO_UUID, HandlerBase, RawBody, RequestContext
from kafka_sim.handlers.compact import uvarint
from kafka_sim.topics import valid_topic_name

if TYPE_CHECKING:
    from kafka_sim.state import Partition, Topic


class MetadataHandlers(HandlerBase):
    """ApiVersions, Metadata, DescribeCluster, FindCoordinator."""

    _metadata_cache: dict[int, tuple[Any, bytes, dict[int, tuple[bytes, bytes]]]]
    _topic_bytes: dict[int, dict[str, tuple[Any, ...]]]

    def _init_metadata_caches(self) -> None:
        # api version -> (model state key, encoded topic array, controller -> envelope)
        self._metadata_cache = {}
        # api version -> topic name -> (topic key, alive brokers, bytes, partition keys, partition bytes)
        self._topic_bytes = {}

    # ------------------------------------------------------------------ ApiVersions
    def api_versions(self, ctx: RequestContext, request: Any) -> Any:
        """ApiVersions: the supported ranges (the v0 fallback is built by the server)."""
        # The runtime's own table: a cluster may hide keys (an older Kafka without them).
        supported = getattr(self.runtime, "supported", SUPPORTED)
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(supported.items())]
        return ApiVersionsResponse(version=ctx.api_version, error_code=NONE, api_keys=keys,
                                   throttle_time_ms=0)

    @staticmethod
    def api_versions_unsupported(request_version: int) -> Any:
        """The v0 reply Kafka sends when the client's ApiVersions version is too new.

        :param request_version: the version the client asked for
        """
        lo, hi = SUPPORTED[18]
        keys = [ApiVersionsResponse.ApiVersion(api_key=18, min_version=lo, max_version=hi)]
        return ApiVersionsResponse(version=0, error_code=UNSUPPORTED_VERSION, api_keys=keys)

    # ------------------------------------------------------------------ Metadata
    def _metadata_state_key(self) -> Any:
        """A value that changes whenever anything a Metadata response shows changes.

        Uses the model's ``state_version`` counter (bumped on every metadata-visible
        change) when it has one; otherwise None and the per-topic cache does the work.
        """
        key = getattr(self.model, "state_version", None)
        if key is None:
            return None
        if callable(key):
            key = key()
        return (key, tuple(sorted(self.runtime.endpoints.items())))

    def metadata(self, ctx: RequestContext, request: Any) -> Any:
        """Metadata: brokers with racks, controller, topics with ids, partitions with ISR.

        Auto topic creation is off, as on a production cluster. A full (all topics)
        response of a 100k-partition cluster costs about a second to build with the
        protocol classes, so it is assembled from per-topic encoded bytes cached until
        that topic's partition state changes, and the whole body is cached on the
        model's metadata version when the model offers one.
        """
        v = ctx.api_version
        flexible = MetadataResponse.flexible_version_q(v)
        all_topics = request.topics is None or (v == 0 and not request.topics)
        with self.model.lock:
            self.model.advance()
            if not all_topics:
                return self._requested_body(v, flexible, self._requested_topics(v, request))
            state = self._metadata_state_key()
            cached = self._metadata_cache.get(v)
            if state is None or cached is None or cached[0] != state:
                cached = (state, b"".join(self._encode_topics_blob(v, flexible)), {})
                if state is not None:
                    self._metadata_cache[v] = cached
            # KRaftMetadataCache.getControllerId: a random live broker, per request
            controller = self.model.controller_id
            envelope = cached[2].get(controller)
            if envelope is None:
                envelope = cached[2][controller] = self._envelope(v, flexible, controller)
            head, tail = envelope
            return RawBody([head, cached[1], tail], flexible)

    def _requested_topics(self, v: int, request: Any) -> list[tuple[Any, str | None, Any, int]]:
        wanted = []
        for rt in request.topics:
            tid = getattr(rt, "topic_id", None) if v >= 10 else None
            by_id = rt.name is None and tid not in (None, ZERO_UUID)
            topic, code = self._resolve_topic(rt.name, tid, by_id)
            if topic is None and rt.name is not None and not valid_topic_name(rt.name):
                code = INVALID_TOPIC_EXCEPTION
            wanted.append((topic, rt.name, tid, code))
        return wanted

    def _encode_topic(self, topic: Topic, alive: set[int], v: int, flexible: bool,
                      previous: tuple[Any, ...] | None) -> tuple[bytes, list[Any], list[bytes]]:
        """One topic's encoded entry, re-encoding only partitions whose metadata changed.

        :returns: (bytes, partition keys, partition bytes) - the last two for the next call
        """
        TopicCls = MetadataResponse.MetadataResponseTopic
        outer = MetadataResponse.fields["topics"].array_of
        inner = outer.fields["partitions"].array_of
        parts = topic.partitions
        # partition_epoch is bumped by the model on every metadata-visible change
        keys = [p.partition_epoch for p in parts]
        if previous is not None and len(previous[0]) == len(keys):
            chunks = list(previous[1])
            stale = [i for i, (a, b) in enumerate(zip(keys, previous[0])) if a != b]
        else:
            chunks = [b""] * len(keys)
            stale = range(len(keys))
        for i in stale:
            chunks[i] = inner.encode(_partition_fields(parts[i], alive), version=v, compact=flexible,
                                     tagged=flexible)
        empty = TopicCls(error_code=NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
                         partitions=[])
        encoded = outer.encode(empty, version=v, compact=flexible, tagged=flexible)
        suffix_len = (4 if v >= 8 else 0) + (1 if flexible else 0)  # authorized operations, tagged fields
        return _splice_array(encoded, suffix_len, flexible, chunks), keys, chunks

    def _broker_entries(self) -> list[Any]:
        out = []
        for b in self._alive_brokers():
            host, port = self._endpoint(b.id)
            out.append(MetadataResponse.MetadataResponseBroker(node_id=b.id, host=host, port=port,
                                                               rack=b.rack))
        return out

    def _requested_body(self, v: int, flexible: bool, wanted: list[tuple[Any, str | None, Any, int]]) -> RawBody:
        """A response for the requested topics, from the same per-topic bytes as the all-topics one
        (a health read of a thousand topics every 30 s would otherwise rebuild each partition)."""
        outer = MetadataResponse.fields["topics"].array_of
        alive = {b.id for b in self._alive_brokers()}
        alive_key = frozenset(alive)
        chunks = []
        for topic, name, tid, code in wanted:
            if topic is None:
                missing = MetadataResponse.MetadataResponseTopic(error_code=code, name=name, topic_id=tid or ZERO_UUID,
                                                                 is_internal=False, partitions=[])
                chunks.append(outer.encode(missing, version=v, compact=flexible, tagged=flexible))
            else:
                chunks.append(self._topic_bytes_of(topic, alive, alive_key, v, flexible))
        head, tail = self._envelope(v, flexible, self.model.controller_id)
        return RawBody([head, _array_count(len(chunks), flexible), *chunks, tail], flexible)

    def _topic_bytes_of(self, topic: Topic, alive: set[int], alive_key: frozenset[int], v: int, flexible: bool
                        ) -> bytes:
        """One topic's encoded entry, cached until its partitions or the live brokers change."""
        cache = self._topic_bytes.setdefault(v, {})
        key = (topic.topic_id, topic.version, len(topic.partitions))
        hit = cache.get(topic.name)
        if hit is None or hit[0] != key or hit[1] != alive_key:
            # partition bytes are reusable only while the same brokers are alive
            previous = hit[3:] if hit is not None and hit[0][0] == topic.topic_id and hit[1] == alive_key else None
            body, pkeys, pchunks = self._encode_topic(topic, alive, v, flexible, previous)
            hit = (key, alive_key, body, pkeys, pchunks)
            cache[topic.name] = hit
        return hit[2]

    def _encode_topics_blob(self, v: int, flexible: bool) -> list[bytes]:
        """The all-topics array (count, then one buffer per topic), reusing unchanged topics' bytes."""
        alive = {b.id for b in self._alive_brokers()}
        alive_key = frozenset(alive)
        chunks = [self._topic_bytes_of(self.model.topics[name], alive, alive_key, v, flexible)
                  for name in sorted(self.model.topics)]
        cache = self._topic_bytes.setdefault(v, {})
        for gone in set(cache) - set(self.model.topics):
            del cache[gone]
        return [_array_count(len(chunks), flexible), *chunks]

    def _envelope(self, v: int, flexible: bool, controller: int) -> tuple[bytes, bytes]:
        """The response around the topic array: (bytes before it, bytes after it)."""
        empty = MetadataResponse(version=v, throttle_time_ms=0, brokers=self._broker_entries(),
                                 cluster_id=self.model.cluster_id, controller_id=controller,
                                 topics=[], error_code=NONE).encode(version=v)
        suffix_len = (4 if 8 <= v <= 10 else 0) + (2 if v >= 13 else 0) + (1 if flexible else 0)
        marker_len = 1 if flexible else 4
        end = len(empty) - suffix_len
        return empty[:end - marker_len], empty[end:]

    def _encode_full_metadata(self, v: int, flexible: bool) -> bytes:
        """An all-topics response as one byte string (tests, benchmarks)."""
        head, tail = self._envelope(v, flexible, self.model.controller_id)
        return b"".join([head, *self._encode_topics_blob(v, flexible), tail])

    # ------------------------------------------------------------------ DescribeCluster
    def describe_cluster(self, ctx: RequestContext, request: Any) -> Any:
        """DescribeCluster: live brokers (and fenced = stopped ones when asked, v2+)."""
        R = DescribeClusterResponse
        endpoint_type = request.endpoint_type if ctx.api_version >= 1 else 1
        if endpoint_type != 1:
            # Brokers only answer for broker endpoints; controllers are asked directly.
            return R(version=ctx.api_version, throttle_time_ms=0, error_code=UNSUPPORTED_ENDPOINT_TYPE,
                     error_message="The broker only handles broker endpoints (endpointType=1)",
                     endpoint_type=endpoint_type, cluster_id=self.model.cluster_id,
                     controller_id=-1, brokers=[])
        include_fenced = ctx.api_version >= 2 and request.include_fenced_brokers
        brokers = []
        with self.model.lock:
            for _, b in sorted(self.model.brokers.items()):
                if not b.alive and not include_fenced:
                    continue
                host, port = self._endpoint(b.id)
                brokers.append(R.DescribeClusterBroker(broker_id=b.id, host=host, port=port,
                                                       rack=b.rack, is_fenced=not b.alive))
            return R(version=ctx.api_version, throttle_time_ms=0, error_code=NONE, error_message=None,
                     endpoint_type=1, cluster_id=self.model.cluster_id,
                     controller_id=self.model.controller_id, brokers=brokers)

    # ------------------------------------------------------------------ coordinator / producer ids
    def find_coordinator(self, ctx: RequestContext, request: Any) -> Any:
        """FindCoordinator: the simulator runs no group or transaction coordinator."""
        R = FindCoordinatorResponse
        msg = "The simulated cluster has no group or transaction coordinator"
        if ctx.api_version >= 4:
            coords = [R.Coordinator(key=k, node_id=-1, host="", port=-1,
                                    error_code=COORDINATOR_NOT_AVAILABLE, error_message=msg)
                      for k in request.coordinator_keys]
            return R(version=ctx.api_version, throttle_time_ms=0, coordinators=coords)
        return R(version=ctx.api_version, throttle_time_ms=0, error_code=COORDINATOR_NOT_AVAILABLE,
                 error_message=msg, node_id=-1, host="", port=-1)


def _partition_fields(p: Partition, alive: set[int]) -> dict[str, Any]:
    """One Metadata partition entry as a plain dict (encodes like the protocol class, faster)."""
    leader = p.leader if p.leader in alive else -1  # KRaft reports only a live leader
    return {"error_code": NONE if leader >= 0 else LEADER_NOT_AVAILABLE, "partition_index": p.index,
            "leader_id": leader, "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr), "offline_replicas": [b for b in p.replicas if b not in alive]}


def _array_count(n: int, flexible: bool) -> bytes:
    """An array's length prefix: compact (uvarint n + 1) or int32."""
    return uvarint(n + 1) if flexible else struct.pack(">i", n)


def _splice_array(encoded_empty: bytes, suffix_len: int, flexible: bool, items: list[bytes]) -> bytes:
    """Put pre-encoded array items into a structure encoded with that (last) array empty.

    :param encoded_empty: the structure encoded with an empty array
    :param suffix_len: bytes after the array (fields that follow it, tagged-field section)
    :param flexible: compact array (uvarint length + 1) rather than int32 length
    :param items: the encoded items
    """
    marker_len = 1 if flexible else 4
    end = len(encoded_empty) - suffix_len
    head = encoded_empty[:end - marker_len]
    tail = encoded_empty[end:]
    count = _array_count(len(items), flexible)
    return b"".join([head, count, *items, tail])
