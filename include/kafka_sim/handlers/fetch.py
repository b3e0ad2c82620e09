"""Handlers of reads on a partition leader: Fetch, ListOffsets, OffsetForLeaderEpoch."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse, OffsetForLeaderEpochResponse

from kafka_sim.errors import FENCED_LEADER_EPOCH, NONE, NOT_LEADER_OR_FOLLOWER
from kafka_sim.handlers.base import ZERO_UUID, HandlerBase, RequestContext

if TYPE_CHECKING:
    from kafka_sim.state import Topic


class FetchHandlers(HandlerBase):
    """Fetch, ListOffsets, OffsetForLeaderEpoch (leader-only reads)."""

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
        """One pass over the requested partitions: (response, record bytes, any partition failed)."""
        v = ctx.api_version
        by_id = v >= 13
        R = FetchResponse
        TopicR = R.FetchableTopicResponse
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
                    entry, nbytes, failed = self._fetch_partition(ctx, topic, tcode, fp, budget - total, total == 0,
                                                                  leaders_mentioned)
                    parts_out.append(entry)
                    total += nbytes
                    errors = errors or failed
                topics_out.append(TopicR(topic=ft.topic if not by_id else "",
                                         topic_id=ft.topic_id if by_id else ZERO_UUID,
                                         partitions=parts_out))
            kw: dict[str, Any] = {}
            if v >= 16 and leaders_mentioned:
                kw["node_endpoints"] = [
                    R.NodeEndpoint(node_id=b, host=self._endpoint(b)[0], port=self._endpoint(b)[1],
                                   rack=self.model.brokers[b].rack)
                    for b in sorted(leaders_mentioned)]
        response = R(version=v, throttle_time_ms=0, error_code=NONE, session_id=0,
                     responses=topics_out, **kw)
        return response, total, errors

    def _fetch_partition(self, ctx: RequestContext, topic: Topic | None, topic_code: int, fp: Any,
                         budget_left: int, first: bool, leaders_mentioned: set[int]) -> tuple[Any, int, bool]:
        """One partition's Fetch entry: (entry, record bytes, failed).

        :param topic_code: the error for a topic that did not resolve
        :param budget_left: bytes the response-wide max_bytes still allows
        :param first: no partition before this one returned data
        :param leaders_mentioned: collects the leaders an error entry names (v16 node endpoints)
        """
        v = ctx.api_version
        PartR = FetchResponse.FetchableTopicResponse.PartitionData
        part = self._partition(topic, fp.partition) if topic is not None else None
        if topic is None:
            code = topic_code
        else:
            epoch = fp.current_leader_epoch if v >= 9 else -1
            code = self._leader_check(ctx.broker_id, part, epoch)
        if code != NONE or topic is None:
            kw: dict[str, Any] = {}
            if part is not None and v >= 12 and code in (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH):
                kw["current_leader"] = PartR.LeaderIdAndEpoch(leader_id=part.leader, leader_epoch=part.leader_epoch)
                if part.leader >= 0:
                    leaders_mentioned.add(part.leader)
            return PartR(partition_index=fp.partition, error_code=code, high_watermark=-1, last_stable_offset=-1,
                         log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
                         records=None, **kw), 0, True
        # KIP-74: the response-wide max_bytes is shared in request order; the
        # first partition with data may exceed it by one batch.
        max_bytes = fp.partition_max_bytes if first else min(fp.partition_max_bytes, budget_left)
        code, hw, lso_start, records = self.model.read(
            ctx.broker_id, topic.name, fp.partition, fp.fetch_offset, max(0, max_bytes))
        if max_bytes <= 0:
            records = b""
        if code != NONE:
            records = None
        entry = PartR(partition_index=fp.partition, error_code=code, high_watermark=hw, last_stable_offset=hw,
                      log_start_offset=lso_start, aborted_transactions=None, preferred_read_replica=-1,
                      records=records or b"")
        return entry, len(records or b""), code != NONE

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
