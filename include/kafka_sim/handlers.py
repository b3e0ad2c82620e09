"""Request handlers of the simulated broker: decoded request in, response object out.

One :class:`Handlers` instance serves every broker of a cluster; each call carries
the id of the broker the request arrived at, so leader-only APIs (Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch) answer NOT_LEADER_OR_FOLLOWER like Kafka, while
admin APIs are accepted on every broker (KRaft brokers forward them to the
controller). All state lives in the :class:`~kafka_sim.model.ClusterModel`; this
module translates between the wire structures and the model's plain values.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from kafka.protocol.admin import (
    AlterConfigsResponse, AlterPartitionReassignmentsResponse, AlterReplicaLogDirsResponse,
    CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse,
    DescribeClusterResponse, DescribeConfigsResponse, DescribeLogDirsResponse,
    ElectLeadersResponse, IncrementalAlterConfigsResponse, ListPartitionReassignmentsResponse,
)
from kafka.protocol.consumer import (
    FetchResponse, ListOffsetsResponse, OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorResponse, MetadataResponse
from kafka.protocol.producer import InitProducerIdResponse, ProduceResponse

from kafka_sim.apiversions import SUPPORTED
from kafka_sim.records import RecordBatchError, parse_batches

log = logging.getLogger(__name__)

from kafka_sim.errors import (  # noqa: F401  (Kafka error codes)
    NONE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION,
    LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR, INVALID_TOPIC_EXCEPTION, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    INVALID_REQUIRED_ACKS, UNSUPPORTED_VERSION, INVALID_REPLICATION_FACTOR, INVALID_REQUEST,
    OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
    ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_ID, UNSUPPORTED_ENDPOINT_TYPE)

ZERO_UUID = uuid.UUID(int=0)
# Kafka keeps the last five batches per producer and partition for de-duplication.
PRODUCER_BATCH_CACHE = 5
_EPOCH_AT = struct.Struct(">i")


class Runtime(Protocol):
    """What the handlers need from the server side (kept here so handlers never import server)."""

    model: Any
    endpoints: dict[int, tuple[str, int]]

    def notify(self) -> None:
        """Wake every waiter: state changed."""

    async def wait_change(self, timeout: float) -> None:
        """Sleep until the next tick or state change, at most ``timeout`` seconds."""


@dataclass
class RequestContext:
    """Where a request came from and how it was framed."""

    broker_id: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass
class RawBody:
    """A response body already encoded (the metadata cache hands these out), possibly in parts."""

    body: bytes | list[bytes]
    flexible: bool


@dataclass
class _ProducerBatch:
    epoch: int
    first_seq: int
    last_seq: int
    base_offset: int


class Handlers:
    """Turns decoded requests into responses against one cluster model.

    :param runtime: the server runtime (model, broker endpoints, wake-ups)
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.model = runtime.model
        self._next_producer_id = 1000
        # (producer_id, topic, partition) -> recent batches, for idempotent de-duplication
        self._producer_batches: dict[tuple[int, str, int], deque[_ProducerBatch]] = {}
        self._producer_epochs: dict[int, int] = {}
        self._metadata_cache: dict[int, tuple[Any, bytes]] = {}
        self._topic_bytes: dict[int, dict[str, tuple[Any, bytes]]] = {}
        self._table: dict[int, Callable[[RequestContext, Any], Any]] = {
            0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata,
            10: self.find_coordinator, 18: self.api_versions, 19: self.create_topics,
            20: self.delete_topics, 22: self.init_producer_id, 23: self.offset_for_leader_epoch,
            32: self.describe_configs, 33: self.alter_configs, 34: self.alter_replica_log_dirs,
            35: self.describe_log_dirs, 37: self.create_partitions, 43: self.elect_leaders,
            44: self.incremental_alter_configs, 45: self.alter_partition_reassignments,
            46: self.list_partition_reassignments, 60: self.describe_cluster,
        }

    # ------------------------------------------------------------------ dispatch
    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        """Run the handler for ``ctx.api_key``; returns a response, a RawBody or None (acks=0).

        :param ctx: request context
        :param request: the decoded request object
        """
        fn = self._table[ctx.api_key]
        result = fn(ctx, request)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    # ------------------------------------------------------------------ helpers
    def _alive_brokers(self) -> list[Any]:
        return [b for _, b in sorted(self.model.brokers.items()) if b.alive]

    def _endpoint(self, broker_id: int) -> tuple[str, int]:
        return self.runtime.endpoints[broker_id]

    def _topic_by_id(self, topic_id: uuid.UUID) -> Any:
        for topic in self.model.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def _resolve_topic(self, name: str | None, topic_id: uuid.UUID | None, by_id: bool) -> tuple[Any, int]:
        """Find a topic by name or id; returns (topic or None, error code)."""
        if by_id:
            topic = self._topic_by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
            return topic, (NONE if topic is not None else UNKNOWN_TOPIC_ID)
        topic = self.model.topics.get(name) if name is not None else None
        return topic, (NONE if topic is not None else UNKNOWN_TOPIC_OR_PARTITION)

    def _partition(self, topic: Any, index: int) -> Any:
        if topic is None or index < 0 or index >= len(topic.partitions):
            return None
        return topic.partitions[index]

    def _leader_check(self, broker_id: int, part: Any, current_leader_epoch: int = -1) -> int:
        """Kafka's leader-side checks for client requests on a partition."""
        if part is None:
            return UNKNOWN_TOPIC_OR_PARTITION
        if current_leader_epoch >= 0:
            # KIP-320: a client with an older epoch is fenced, a newer one is ahead of us.
            if current_leader_epoch < part.leader_epoch:
                return FENCED_LEADER_EPOCH
            if current_leader_epoch > part.leader_epoch:
                return UNKNOWN_LEADER_EPOCH
        if part.leader != broker_id:
            return NOT_LEADER_OR_FOLLOWER
        return NONE

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
                return self._build_metadata(v, self._requested_topics(v, request))
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
            if topic is None and rt.name is not None and not _valid_topic_name(rt.name):
                code = INVALID_TOPIC_EXCEPTION
            wanted.append((topic, rt.name, tid, code))
        return wanted

    def _partition_entry(self, p: Any, alive: set[int]) -> Any:
        PartCls = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition
        # KRaft brokers report a leader only if it is alive (fenced otherwise).
        leader = p.leader if p.leader in alive else -1
        return PartCls(error_code=NONE if leader >= 0 else LEADER_NOT_AVAILABLE,
                       partition_index=p.index, leader_id=leader, leader_epoch=p.leader_epoch,
                       replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
                       offline_replicas=[b for b in p.replicas if b not in alive])

    def _topic_entry(self, topic: Any, alive: set[int]) -> Any:
        TopicCls = MetadataResponse.MetadataResponseTopic
        parts = [self._partition_entry(p, alive) for p in topic.partitions]
        return TopicCls(error_code=NONE, name=topic.name, topic_id=topic.topic_id,
                        is_internal=topic.internal, partitions=parts)

    def _encode_topic(self, topic: Any, alive: set[int], v: int, flexible: bool,
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

    def _build_metadata(self, v: int, wanted: list[tuple[Any, str | None, Any, int]]) -> Any:
        TopicCls = MetadataResponse.MetadataResponseTopic
        alive = {b.id for b in self._alive_brokers()}
        topics_out = []
        for topic, name, tid, code in wanted:
            if topic is None:
                topics_out.append(TopicCls(error_code=code, name=name, topic_id=tid or ZERO_UUID,
                                           is_internal=False, partitions=[]))
            else:
                topics_out.append(self._topic_entry(topic, alive))
        return MetadataResponse(version=v, throttle_time_ms=0, brokers=self._broker_entries(),
                                cluster_id=self.model.cluster_id,
                                controller_id=self.model.controller_id, topics=topics_out,
                                error_code=NONE)

    def _encode_topics_blob(self, v: int, flexible: bool) -> list[bytes]:
        """The all-topics array (count, then one buffer per topic), reusing unchanged topics' bytes."""
        alive = {b.id for b in self._alive_brokers()}
        alive_key = frozenset(alive)
        cache = self._topic_bytes.setdefault(v, {})
        chunks = []
        for name in sorted(self.model.topics):
            topic = self.model.topics[name]
            key = (topic.topic_id, topic.version, len(topic.partitions))
            hit = cache.get(name)
            if hit is None or hit[0] != key or hit[1] != alive_key:
                # partition bytes are reusable only while the same brokers are alive
                previous = hit[3:] if hit is not None and hit[0][0] == topic.topic_id and hit[1] == alive_key else None
                body, pkeys, pchunks = self._encode_topic(topic, alive, v, flexible, previous)
                hit = (key, alive_key, body, pkeys, pchunks)
                cache[name] = hit
            chunks.append(hit[2])
        for gone in set(cache) - set(self.model.topics):
            del cache[gone]
        count = _uvarint(len(chunks) + 1) if flexible else struct.pack(">i", len(chunks))
        return [count, *chunks]

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

    def init_producer_id(self, ctx: RequestContext, request: Any) -> Any:
        """InitProducerId for idempotent (non-transactional) producers."""
        R = InitProducerIdResponse
        if request.transactional_id is not None:
            return R(version=ctx.api_version, throttle_time_ms=0, error_code=NOT_COORDINATOR,
                     producer_id=-1, producer_epoch=-1)
        pid = request.producer_id if ctx.api_version >= 3 else -1
        if pid is not None and pid >= 0:
            # KIP-360: an existing producer asks for an epoch bump after an error.
            current = self._producer_epochs.get(pid)
            if current is None or current != request.producer_epoch:
                return R(version=ctx.api_version, throttle_time_ms=0,
                         error_code=INVALID_PRODUCER_EPOCH, producer_id=-1, producer_epoch=-1)
            epoch = current + 1
        else:
            pid = self._next_producer_id
            self._next_producer_id += 1
            epoch = 0
        self._producer_epochs[pid] = epoch
        return R(version=ctx.api_version, throttle_time_ms=0, error_code=NONE,
                 producer_id=pid, producer_epoch=epoch)

    # ------------------------------------------------------------------ Produce
    def _dedupe(self, pid: int, epoch: int, topic: str, partition: int,
                first_seq: int, last_seq: int) -> tuple[int, int | None]:
        """Idempotent producer checks: (error, base offset of a duplicate batch or None)."""
        known = self._producer_epochs.get(pid)
        if known is not None and epoch < known:
            return INVALID_PRODUCER_EPOCH, None
        recent = self._producer_batches.get((pid, topic, partition))
        if not recent or recent[-1].epoch != epoch:
            return NONE, None
        for b in recent:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return NONE, b.base_offset
        expected = (recent[-1].last_seq + 1) % (2**31)
        if first_seq != expected:
            return OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return NONE, None

    def _remember_batch(self, pid: int, epoch: int, topic: str, partition: int,
                        first_seq: int, last_seq: int, base_offset: int) -> None:
        key = (pid, topic, partition)
        recent = self._producer_batches.get(key)
        if recent is None or (recent and recent[-1].epoch != epoch):
            recent = self._producer_batches[key] = deque(maxlen=PRODUCER_BATCH_CACHE)
        recent.append(_ProducerBatch(epoch, first_seq, last_seq, base_offset))

    async def produce(self, ctx: RequestContext, request: Any) -> Any:
        """Produce: append on the leader; acks=-1 waits until the high watermark covers it."""
        v = ctx.api_version
        by_id = v >= 13
        acks = request.acks
        R = ProduceResponse
        TopicR = R.TopicProduceResponse
        PartR = TopicR.PartitionProduceResponse
        # results: (topic name, topic id, partition, code, base_offset, end_offset, message)
        results: list[list[Any]] = []
        with self.model.lock:
            self.model.advance()
            for td in request.topic_data:
                name = None if by_id else td.name
                tid = td.topic_id if by_id else None
                topic, tcode = self._resolve_topic(name, tid, by_id)
                for pd in td.partition_data:
                    row = [name, tid, pd.index, NONE, -1, -1, None]
                    results.append(row)
                    if acks not in (0, 1, -1):
                        row[3] = INVALID_REQUIRED_ACKS
                        continue
                    if topic is None:
                        row[3] = tcode
                        continue
                    part = self._partition(topic, pd.index)
                    code = self._leader_check(ctx.broker_id, part)
                    if code != NONE:
                        row[3] = code
                        continue
                    row[3], row[4], row[5], row[6] = self._append(ctx.broker_id, topic.name, part,
                                                                  pd.records, acks)
                    row[0] = topic.name
        if acks == 0:
            return None
        if acks == -1:
            await self._await_replication(results, request.timeout_ms)
        by_topic: dict[Any, list[Any]] = {}
        for name, tid, index, code, base, _end, msg in results:
            key = tid if by_id else name
            pr = PartR(index=index, error_code=code, base_offset=base, log_append_time_ms=-1,
                       log_start_offset=self._log_start(name, index) if code == NONE else -1,
                       record_errors=[], error_message=msg)
            if code in (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH) and v >= 10:
                leader = self._current_leader(name, index)
                if leader is not None:
                    pr = PartR(index=index, error_code=code, base_offset=base, log_append_time_ms=-1,
                               log_start_offset=-1, record_errors=[], error_message=msg,
                               current_leader=PartR.LeaderIdAndEpoch(leader_id=leader[0],
                                                                     leader_epoch=leader[1]))
            by_topic.setdefault(key, []).append(pr)
        responses = [TopicR(name=k if not by_id else "", topic_id=k if by_id else ZERO_UUID,
                            partition_responses=prs) for k, prs in by_topic.items()]
        return R(version=v, responses=responses, throttle_time_ms=0)

    def _append(self, broker_id: int, topic: str, part: Any, records: bytes | None,
                acks: int) -> tuple[int, int, int, str | None]:
        """Append every batch of one partition's records; (code, base, end, message)."""
        if not records:
            return CORRUPT_MESSAGE, -1, -1, "Produce request without records"
        try:
            headers = parse_batches(records)
        except RecordBatchError as e:
            return CORRUPT_MESSAGE, -1, -1, str(e)
        if not headers:
            return CORRUPT_MESSAGE, -1, -1, "Produce request without record batches"
        view = memoryview(records)
        base_offset = -1
        end_offset = -1
        for h in headers:
            first_seq, last_seq = h.base_sequence, h.last_sequence
            idempotent = h.producer_id >= 0 and first_seq >= 0
            if idempotent:
                code, dup = self._dedupe(h.producer_id, h.producer_epoch, topic, part.index,
                                         first_seq, last_seq)
                if code != NONE:
                    return code, -1, -1, None
                if dup is not None:
                    # Kafka answers a retried duplicate with the offset of the original append.
                    if base_offset < 0:
                        base_offset = dup
                    end_offset = max(end_offset, dup + h.last_offset_delta + 1)
                    continue
            batch = bytearray(view[h.position:h.position + h.size])
            # The leader stamps its epoch into the batch (KIP-101); not covered by the CRC.
            _EPOCH_AT.pack_into(batch, 12, part.leader_epoch)
            code, base, end = self.model.append(broker_id, topic, part.index, bytes(batch),
                                                h.record_count, acks)
            if code != NONE:
                return code, -1, -1, None
            if idempotent:
                self._remember_batch(h.producer_id, h.producer_epoch, topic, part.index,
                                     first_seq, last_seq, base)
            if base_offset < 0:
                base_offset = base
            end_offset = end
        self.runtime.notify()
        return NONE, base_offset, end_offset, None

    def _log_start(self, topic: str | None, partition: int) -> int:
        if topic is None:
            return -1
        with self.model.lock:
            part = self._partition(self.model.topics.get(topic), partition)
            if part is None or part.leader < 0:
                return -1
            code, _ts, offset, _ep = self.model.list_offsets(part.leader, topic, partition, -2)
            return offset if code == NONE else -1

    def _current_leader(self, topic: str | None, partition: int) -> tuple[int, int] | None:
        if topic is None:
            return None
        with self.model.lock:
            part = self._partition(self.model.topics.get(topic), partition)
            if part is None:
                return None
            return part.leader, part.leader_epoch

    async def _await_replication(self, results: list[list[Any]], timeout_ms: int) -> None:
        """Wait until the HW passes every acks=-1 append, as Kafka's DelayedProduce does."""
        deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
        pending = [r for r in results if r[3] == NONE and r[5] >= 0]
        while pending:
            still = []
            with self.model.lock:
                self.model.advance()
                for r in pending:
                    topic = self.model.topics.get(r[0])
                    part = self._partition(topic, r[2])
                    if part is None:
                        r[3] = UNKNOWN_TOPIC_OR_PARTITION
                        continue
                    if self.model.high_watermark(r[0], r[2]) >= r[5]:
                        # Partition.checkEnoughReplicasReachOffset: committed, but if the ISR
                        # is now below min.insync.replicas the producer is told so
                        if len(part.isr) < self._min_isr(r[0]):
                            r[3] = NOT_ENOUGH_REPLICAS_AFTER_APPEND
                        continue
                    still.append(r)  # not committed yet (or the leader moved): keep waiting
            pending = still
            if not pending:
                break
            if time.monotonic() >= deadline:
                for r in pending:
                    r[3] = REQUEST_TIMED_OUT
                break
            await self.runtime.wait_change(deadline - time.monotonic())

    def _min_isr(self, topic: str) -> int:
        fn = getattr(self.model, "min_insync_replicas", None)
        if fn is not None:
            return int(fn(topic))
        code, _msg, entries = self.model.describe_configs(2, topic, ["min.insync.replicas"])
        for e in entries:
            if e.name == "min.insync.replicas" and e.value is not None:
                return int(e.value)
        return 1

    # ------------------------------------------------------------------ Fetch
    async def fetch(self, ctx: RequestContext, request: Any) -> Any:
        """Fetch from the leader; long-polls up to max_wait_ms until min_bytes are there."""
        deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000.0
        while True:
            response, total, errors = self._fetch_once(ctx, request)
            if errors or total >= max(1, request.min_bytes) or time.monotonic() >= deadline:
                return response
            await self.runtime.wait_change(deadline - time.monotonic())

    def _fetch_once(self, ctx: RequestContext, request: Any) -> tuple[Any, int, bool]:
        v = ctx.api_version
        by_id = v >= 13
        R = FetchResponse
        TopicR = R.FetchableTopicResponse
        PartR = TopicR.PartitionData
        budget = request.max_bytes if request.max_bytes and request.max_bytes > 0 else 0x7FFFFFFF
        total = 0
        errors = False
        topics_out = []
        leaders_mentioned: set[int] = set()
        with self.model.lock:
            self.model.advance()
            for ft in request.topics:
                name = None if by_id else ft.topic
                tid = ft.topic_id if by_id else None
                topic, tcode = self._resolve_topic(name, tid, by_id)
                parts_out = []
                for fp in ft.partitions:
                    part = self._partition(topic, fp.partition) if topic is not None else None
                    if topic is None:
                        code = tcode
                    else:
                        epoch = fp.current_leader_epoch if v >= 9 else -1
                        code = self._leader_check(ctx.broker_id, part, epoch)
                    if code != NONE:
                        errors = True
                        kw: dict[str, Any] = {}
                        if part is not None and v >= 12 and code in (NOT_LEADER_OR_FOLLOWER,
                                                                      FENCED_LEADER_EPOCH):
                            kw["current_leader"] = PartR.LeaderIdAndEpoch(
                                leader_id=part.leader, leader_epoch=part.leader_epoch)
                            if part.leader >= 0:
                                leaders_mentioned.add(part.leader)
                        parts_out.append(PartR(partition_index=fp.partition, error_code=code,
                                               high_watermark=-1, last_stable_offset=-1,
                                               log_start_offset=-1, aborted_transactions=None,
                                               preferred_read_replica=-1, records=None, **kw))
                        continue
                    # KIP-74: the response-wide max_bytes is shared in request order; the
                    # first partition with data may exceed it by one batch.
                    max_bytes = min(fp.partition_max_bytes, budget - total) if total else fp.partition_max_bytes
                    code, hw, lso_start, records = self.model.read(
                        ctx.broker_id, topic.name, fp.partition, fp.fetch_offset, max(0, max_bytes))
                    if max_bytes <= 0:
                        records = b""
                    if code != NONE:
                        errors = True
                        records = None
                    total += len(records or b"")
                    parts_out.append(PartR(partition_index=fp.partition, error_code=code,
                                           high_watermark=hw, last_stable_offset=hw,
                                           log_start_offset=lso_start, aborted_transactions=None,
                                           preferred_read_replica=-1, records=records or b""))
                topics_out.append(TopicR(topic=ft.topic if not by_id else "",
                                         topic_id=ft.topic_id if by_id else ZERO_UUID,
                                         partitions=parts_out))
            kw2: dict[str, Any] = {}
            if v >= 16 and leaders_mentioned:
                kw2["node_endpoints"] = [
                    R.NodeEndpoint(node_id=b, host=self._endpoint(b)[0], port=self._endpoint(b)[1],
                                   rack=self.model.brokers[b].rack)
                    for b in sorted(leaders_mentioned)]
        response = R(version=v, throttle_time_ms=0, error_code=NONE, session_id=0,
                     responses=topics_out, **kw2)
        return response, total, errors

    # ------------------------------------------------------------------ offsets
    def list_offsets(self, ctx: RequestContext, request: Any) -> Any:
        """ListOffsets (earliest -2, latest -1, timestamps) on the leader."""
        v = ctx.api_version
        R = ListOffsetsResponse
        TopicR = R.ListOffsetsTopicResponse
        PartR = TopicR.ListOffsetsPartitionResponse
        out = []
        with self.model.lock:
            self.model.advance()
            for t in request.topics:
                topic = self.model.topics.get(t.name)
                parts = []
                for p in t.partitions:
                    part = self._partition(topic, p.partition_index)
                    epoch = p.current_leader_epoch if v >= 4 else -1
                    code = self._leader_check(ctx.broker_id, part, epoch)
                    if code != NONE:
                        parts.append(PartR(partition_index=p.partition_index, error_code=code,
                                           timestamp=-1, offset=-1, leader_epoch=-1))
                        continue
                    code, ts, off, lep = self.model.list_offsets(ctx.broker_id, t.name,
                                                                 p.partition_index, p.timestamp)
                    parts.append(PartR(partition_index=p.partition_index, error_code=code,
                                       timestamp=ts, offset=off, leader_epoch=lep))
                out.append(TopicR(name=t.name, partitions=parts))
        return R(version=v, throttle_time_ms=0, topics=out)

    def offset_for_leader_epoch(self, ctx: RequestContext, request: Any) -> Any:
        """OffsetForLeaderEpoch (KIP-320 offset validation after a leader change).

        The simulator never truncates a log, so the end offset of the current epoch
        is the log end offset and every older epoch ends no later than it.
        """
        R = OffsetForLeaderEpochResponse
        TopicR = R.OffsetForLeaderTopicResult
        PartR = TopicR.EpochEndOffset
        out = []
        with self.model.lock:
            self.model.advance()
            for t in request.topics:
                topic = self.model.topics.get(t.topic)
                parts = []
                for p in t.partitions:
                    part = self._partition(topic, p.partition)
                    code = self._leader_check(ctx.broker_id, part, p.current_leader_epoch)
                    if code != NONE:
                        parts.append(PartR(error_code=code, partition=p.partition,
                                           leader_epoch=-1, end_offset=-1))
                        continue
                    if p.leader_epoch > part.leader_epoch:
                        parts.append(PartR(error_code=NONE, partition=p.partition,
                                           leader_epoch=-1, end_offset=-1))
                        continue
                    code, _ts, leo, _ = self.model.list_offsets(ctx.broker_id, t.topic, p.partition, -1)
                    parts.append(PartR(error_code=code, partition=p.partition,
                                       leader_epoch=p.leader_epoch, end_offset=leo))
                out.append(TopicR(topic=t.topic, partitions=parts))
        return R(version=ctx.api_version, throttle_time_ms=0, topics=out)

    # ------------------------------------------------------------------ topics
    def create_topics(self, ctx: RequestContext, request: Any) -> Any:
        """CreateTopics (explicit assignments or partitions + RF, configs, validate_only)."""
        v = ctx.api_version
        R = CreateTopicsResponse
        TopicR = R.CreatableTopicResult
        names = [t.name for t in request.topics]
        dups = {n for n in names if names.count(n) > 1}
        out = []
        with self.model.lock:
            for t in request.topics:
                if t.name in dups:
                    code, msg = INVALID_REQUEST, "Duplicate topic name in request."
                else:
                    assignments = ({a.partition_index: list(a.broker_ids) for a in t.assignments}
                                   if t.assignments else None)
                    configs = {c.name: c.value for c in t.configs}
                    code, msg = self.model.create_topic(t.name, t.num_partitions, t.replication_factor,
                                                        assignments, configs, request.validate_only)
                kw: dict[str, Any] = dict(name=t.name, error_code=code, error_message=msg)
                if v >= 5:
                    topic = self.model.topics.get(t.name) if code == NONE else None
                    if topic is not None and not request.validate_only:
                        kw.update(topic_id=topic.topic_id, num_partitions=len(topic.partitions),
                                  replication_factor=len(topic.partitions[0].replicas) if topic.partitions else -1,
                                  configs=self._topic_config_list(t.name))
                    elif code == NONE:
                        nparts = (len(t.assignments) if t.assignments else t.num_partitions)
                        rf = (len(t.assignments[0].broker_ids) if t.assignments else t.replication_factor)
                        kw.update(topic_id=ZERO_UUID, num_partitions=nparts, replication_factor=rf,
                                  configs=[])
                    else:
                        kw.update(topic_id=ZERO_UUID, num_partitions=-1, replication_factor=-1, configs=None)
                out.append(TopicR(**kw))
        if any(r.error_code == NONE for r in out) and not request.validate_only:
            self.runtime.notify()
        return R(version=v, throttle_time_ms=0, topics=out)

    def _topic_config_list(self, topic: str) -> list[Any]:
        Conf = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
        code, _msg, entries = self.model.describe_configs(2, topic, None)
        if code != NONE:
            return []
        return [Conf(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                     is_sensitive=e.is_sensitive) for e in entries]

    def delete_topics(self, ctx: RequestContext, request: Any) -> Any:
        """DeleteTopics by name (v0-5) or by name/id (v6+)."""
        v = ctx.api_version
        R = DeleteTopicsResponse
        out = []
        with self.model.lock:
            if v >= 6:
                items = [(t.name, t.topic_id) for t in request.topics]
            else:
                items = [(n, None) for n in request.topic_names]
            for name, tid in items:
                by_id = name is None
                topic, code = self._resolve_topic(name, tid, by_id)
                msg = None
                if topic is not None:
                    resolved = topic.name
                    code, msg = self.model.delete_topic(resolved)
                    name = resolved
                    tid = topic.topic_id
                out.append(R.DeletableTopicResult(name=name, topic_id=tid or ZERO_UUID,
                                                  error_code=code, error_message=msg))
        self.runtime.notify()
        return R(version=v, throttle_time_ms=0, responses=out)

    def create_partitions(self, ctx: RequestContext, request: Any) -> Any:
        """CreatePartitions (grow a topic, optional explicit assignment)."""
        R = CreatePartitionsResponse
        out = []
        with self.model.lock:
            for t in request.topics:
                assignments = ([list(a.broker_ids) for a in t.assignments]
                               if t.assignments is not None else None)
                code, msg = self.model.create_partitions(t.name, t.count, assignments,
                                                         request.validate_only)
                out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=msg))
        self.runtime.notify()
        return R(version=ctx.api_version, throttle_time_ms=0, results=out)

    # ------------------------------------------------------------------ configs
    def describe_configs(self, ctx: RequestContext, request: Any) -> Any:
        """DescribeConfigs for topic (2) and broker (4) resources, with sources and synonyms."""
        v = ctx.api_version
        R = DescribeConfigsResponse
        ResR = R.DescribeConfigsResult
        EntR = ResR.DescribeConfigsResourceResult
        SynR = EntR.DescribeConfigsSynonym
        out = []
        with self.model.lock:
            for res in request.resources:
                keys = list(res.configuration_keys) if res.configuration_keys is not None else None
                code, msg, entries = self.model.describe_configs(res.resource_type, res.resource_name, keys)
                configs = []
                for e in entries if code == NONE else []:
                    syns = []
                    if request.include_synonyms:
                        for s in e.synonyms or []:
                            sn, sv, ss = _synonym_tuple(s)
                            syns.append(SynR(name=sn, value=sv, source=ss))
                    configs.append(EntR(name=e.name, value=e.value, read_only=e.read_only,
                                        config_source=e.source, is_default=e.source == 5,
                                        is_sensitive=e.is_sensitive, synonyms=syns,
                                        config_type=int(getattr(e, "config_type", 0) or 0),
                                        documentation=getattr(e, "documentation", None)
                                        if request.include_documentation else None))
                out.append(ResR(error_code=code, error_message=msg, resource_type=res.resource_type,
                                resource_name=res.resource_name, configs=configs))
        return R(version=v, throttle_time_ms=0, results=out)

    def incremental_alter_configs(self, ctx: RequestContext, request: Any) -> Any:
        """IncrementalAlterConfigs: SET/DELETE/APPEND/SUBTRACT per key."""
        R = IncrementalAlterConfigsResponse
        out = []
        with self.model.lock:
            for res in request.resources:
                ops = [(c.name, c.config_operation, c.value) for c in res.configs]
                code, msg = self.model.incremental_alter_configs(res.resource_type, res.resource_name,
                                                                 ops, request.validate_only)
                out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                          resource_type=res.resource_type,
                                                          resource_name=res.resource_name))
        return R(version=ctx.api_version, throttle_time_ms=0, responses=out)

    def alter_configs(self, ctx: RequestContext, request: Any) -> Any:
        """AlterConfigs (legacy): replaces the resource's whole dynamic config set."""
        R = AlterConfigsResponse
        out = []
        with self.model.lock:
            for res in request.resources:
                configs = {c.name: c.value for c in res.configs}
                code, msg = self.model.alter_configs(res.resource_type, res.resource_name, configs,
                                                     request.validate_only)
                out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                          resource_type=res.resource_type,
                                                          resource_name=res.resource_name))
        return R(version=ctx.api_version, throttle_time_ms=0, responses=out)

    # ------------------------------------------------------------------ reassignment (KIP-455)
    def alter_partition_reassignments(self, ctx: RequestContext, request: Any) -> Any:
        """AlterPartitionReassignments: start, change or cancel (null replicas) moves."""
        v = ctx.api_version
        R = AlterPartitionReassignmentsResponse
        TopicR = R.ReassignableTopicResponse
        PartR = TopicR.ReassignablePartitionResponse
        allow_rf_change = request.allow_replication_factor_change if v >= 1 else True
        items: list[tuple[str, int, list[int] | None]] = []
        refused: dict[tuple[str, int], tuple[int, str]] = {}
        with self.model.lock:
            self.model.advance()
            for t in request.topics:
                for p in t.partitions:
                    replicas = list(p.replicas) if p.replicas is not None else None
                    if replicas is not None and not allow_rf_change:
                        part = self._partition(self.model.topics.get(t.name), p.partition_index)
                        if part is not None:
                            original = [b for b in part.replicas if b not in part.adding]
                            if len(original) != len(replicas):
                                refused[(t.name, p.partition_index)] = (
                                    INVALID_REPLICATION_FACTOR,
                                    f"The replication factor is changed from {len(original)} to "
                                    f"{len(replicas)} but allowReplicationFactorChange is false")
                                continue
                    items.append((t.name, p.partition_index, replicas))
            results = self.model.alter_reassignments(items)
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), (code, msg) in refused.items():
            by_topic.setdefault(topic, []).append(PartR(partition_index=partition, error_code=code,
                                                        error_message=msg))
        for topic, partition, code, msg in results:
            by_topic.setdefault(topic, []).append(PartR(partition_index=partition, error_code=code,
                                                        error_message=msg))
        self.runtime.notify()
        return R(version=v, throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
                 error_code=NONE, error_message=None,
                 responses=[TopicR(name=k, partitions=sorted(ps, key=lambda x: x.partition_index))
                            for k, ps in by_topic.items()])

    def list_partition_reassignments(self, ctx: RequestContext, request: Any) -> Any:
        """ListPartitionReassignments: in-flight moves with adding/removing replicas."""
        R = ListPartitionReassignmentsResponse
        TopicR = R.OngoingTopicReassignment
        PartR = TopicR.OngoingPartitionReassignment
        topics = ([(t.name, list(t.partition_indexes)) for t in request.topics]
                  if request.topics is not None else None)
        with self.model.lock:
            self.model.advance()
            rows = self.model.list_reassignments(topics)
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, replicas, adding, removing in rows:
            by_topic.setdefault(topic, []).append(PartR(
                partition_index=partition, replicas=list(replicas), adding_replicas=list(adding),
                removing_replicas=list(removing)))
        return R(version=ctx.api_version, throttle_time_ms=0, error_code=NONE, error_message=None,
                 topics=[TopicR(name=k, partitions=v) for k, v in sorted(by_topic.items())])

    # ------------------------------------------------------------------ log dirs (KIP-113)
    def describe_log_dirs(self, ctx: RequestContext, request: Any) -> Any:
        """DescribeLogDirs of the broker the request arrived at."""
        R = DescribeLogDirsResponse
        ResR = R.DescribeLogDirsResult
        TopicR = ResR.DescribeLogDirsTopic
        PartR = TopicR.DescribeLogDirsPartition
        topics = ([(t.topic, list(t.partitions)) for t in request.topics]
                  if request.topics is not None else None)
        with self.model.lock:
            self.model.advance()
            dirs = self.model.describe_log_dirs(ctx.broker_id, topics)
        results = []
        for path, code, total, usable, topic_rows in dirs:
            results.append(ResR(
                error_code=code, log_dir=path, total_bytes=total, usable_bytes=usable,
                topics=[TopicR(name=tn, partitions=[
                    PartR(partition_index=p, partition_size=size, offset_lag=lag, is_future_key=fut)
                    for p, size, lag, fut in prows]) for tn, prows in topic_rows]))
        return R(version=ctx.api_version, throttle_time_ms=0, error_code=NONE, results=results)

    def alter_replica_log_dirs(self, ctx: RequestContext, request: Any) -> Any:
        """AlterReplicaLogDirs: move replicas on this broker to another log dir."""
        R = AlterReplicaLogDirsResponse
        TopicR = R.AlterReplicaLogDirTopicResult
        PartR = TopicR.AlterReplicaLogDirPartitionResult
        items = [(d.path, t.name, p) for d in request.dirs for t in d.topics for p in t.partitions]
        with self.model.lock:
            rows = self.model.alter_replica_log_dirs(ctx.broker_id, items)
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, code in rows:
            by_topic.setdefault(topic, []).append(PartR(partition_index=partition, error_code=code))
        return R(version=ctx.api_version, throttle_time_ms=0,
                 results=[TopicR(topic_name=k, partitions=v) for k, v in by_topic.items()])

    # ------------------------------------------------------------------ leaders
    def elect_leaders(self, ctx: RequestContext, request: Any) -> Any:
        """ElectLeaders (preferred or unclean); a null partition list means every partition."""
        v = ctx.api_version
        R = ElectLeadersResponse
        ResR = R.ReplicaElectionResult
        PartR = ResR.PartitionResult
        election_type = request.election_type if v >= 1 else 0
        parts = ([(tp.topic, p) for tp in request.topic_partitions for p in tp.partitions]
                 if request.topic_partitions is not None else None)
        with self.model.lock:
            self.model.advance()
            rows = self.model.elect_leaders(election_type, parts)
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, code, msg in rows:
            if parts is None and code == ELECTION_NOT_NEEDED:
                # Kafka leaves out partitions that needed nothing when all were asked for.
                continue
            by_topic.setdefault(topic, []).append(PartR(partition_id=partition, error_code=code,
                                                        error_message=msg))
        self.runtime.notify()
        return R(version=v, throttle_time_ms=0, error_code=NONE,
                 replica_election_results=[ResR(topic=k, partition_result=v_)
                                           for k, v_ in by_topic.items()])


def _partition_fields(p: Any, alive: set[int]) -> dict[str, Any]:
    """One Metadata partition entry as a plain dict (encodes like the protocol class, faster)."""
    leader = p.leader if p.leader in alive else -1  # KRaft reports only a live leader
    return {"error_code": NONE if leader >= 0 else LEADER_NOT_AVAILABLE, "partition_index": p.index,
            "leader_id": leader, "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr), "offline_replicas": [b for b in p.replicas if b not in alive]}


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
    count = _uvarint(len(items) + 1) if flexible else struct.pack(">i", len(items))
    return b"".join([head, count, *items, tail])


def _uvarint(n: int) -> bytes:
    """Unsigned varint (compact array lengths)."""
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _synonym_tuple(s: Any) -> tuple[str, str | None, int]:
    if isinstance(s, tuple):
        return s[0], s[1], int(s[2])
    return s.name, s.value, int(s.source)


_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _valid_topic_name(name: str) -> bool:
    """Kafka's topic name rule: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    return 0 < len(name) <= 249 and name not in (".", "..") and all(c in _LEGAL for c in name)
