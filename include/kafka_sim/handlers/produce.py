"""Handlers of writes: InitProducerId and Produce."""
from __future__ import annotations

import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from kafka.protocol.producer import InitProducerIdResponse, ProduceResponse

from kafka_sim.errors import (
    CORRUPT_MESSAGE, FENCED_LEADER_EPOCH, INVALID_PRODUCER_EPOCH, INVALID_REQUIRED_ACKS, NONE,
    NOT_COORDINATOR, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, OUT_OF_ORDER_SEQUENCE_NUMBER,
    REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION,
)
from kafka_sim.handlers.base import ZERO_UUID, HandlerBase, RequestContext
from kafka_sim.records import RecordBatchError, parse_batches

# Kafka keeps the last five batches per producer and partition for de-duplication.
PRODUCER_BATCH_CACHE = 5
_EPOCH_AT = struct.Struct(">i")


@dataclass
class _ProducerBatch:
    """One appended batch of an idempotent producer, remembered to answer its retries."""

    epoch: int
    first_seq: int
    last_seq: int
    base_offset: int


class ProduceHandlers(HandlerBase):
    """InitProducerId and Produce (idempotent de-duplication, acks=-1 waits for the HW)."""

    _next_producer_id: int
    _producer_batches: dict[tuple[int, str, int], deque[_ProducerBatch]]
    _producer_epochs: dict[int, int]

    def _init_producers(self) -> None:
        self._next_producer_id = 1000
        # (producer_id, topic, partition) -> recent batches, for idempotent de-duplication
        self._producer_batches = {}
        self._producer_epochs = {}

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
