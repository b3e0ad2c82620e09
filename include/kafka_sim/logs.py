"""Logs: replicas' log dirs (KIP-113), produce and fetch of record batches, offsets.
"""
from __future__ import annotations

import bisect
import struct
from typing import Iterable

from kafka_sim import errors as E
from kafka_sim.configs import TOPIC_CONFIGS
from kafka_sim.model_base import locked
from kafka_sim.state import NO_RECORDS, Partition, Replica

_BATCH_HEADER = 61


class DirUsage:
    """Bytes per log dir of one broker as a function of time, kept up to date per partition.

    A replica following its leader holds ``base + rate * (t - base_t)`` bytes until its
    partition's rate changes, so those fold into a constant and a slope per dir; replicas with a
    byte count of their own (catching up, or a KIP-113 future replica) are read when asked.
    A partition whose replica here changed shape (rate, dir, tracking, records appended, added
    or removed) is marked stale, and only stale partitions are re-counted on the next read.
    """

    __slots__ = ("static", "slope", "own", "future", "parts", "stale", "broker")

    def __init__(self, broker: int, partitions: Iterable[Partition]) -> None:
        self.broker = broker
        self.static: dict[str, float] = {}
        self.slope: dict[str, float] = {}
        self.own: dict[Partition, Replica] = {}
        self.future: dict[Partition, Replica] = {}
        self.parts: dict[Partition, tuple[str, float, float]] = {}  # tracking replicas' share
        # A dict used as an ordered set: marking is a store, not a method call (a poll's worth of
        # moves marks every replica of each changed partition). Re-counted in marking order, which
        # fixes the order the shares' floats are summed in.
        self.stale: dict[Partition, None] = {}
        for p in partitions:
            self._count(p)

    def _count(self, p: Partition) -> None:
        """Take ``p``'s old share out and its current one in."""
        old = self.parts.pop(p, None)
        static, slope = self.static, self.slope
        if old is not None:
            static[old[0]] -= old[1]
            slope[old[0]] -= old[2]
        self.own.pop(p, None)
        self.future.pop(p, None)
        r = p._reps.get(self.broker)
        if r is None:
            return
        if r.tracking:
            d, rate = r.log_dir, p._rate
            share = self.parts[p] = (d, p._base_bytes - rate * p._base_t, rate)
            static[d] = static.get(d, 0.0) + share[1]
            slope[d] = slope.get(d, 0.0) + rate
        else:
            self.own[p] = r
        if r.future_log_dir is not None:
            self.future[p] = r

    def at(self, t: float) -> dict[str, float]:
        if self.stale:
            for p in self.stale:
                self._count(p)
            self.stale.clear()
        slope = self.slope
        used = {d: c + slope[d] * t for d, c in self.static.items()}
        get = used.get
        for r in self.own.values():
            used[r.log_dir] = get(r.log_dir, 0.0) + r._bytes
        for r in self.future.values():
            used[r.future_log_dir] = get(r.future_log_dir, 0.0) + r.future_bytes  # type: ignore[index]
        return used


def _add_row(per_dir: dict[str, dict[str, list[tuple[int, int, int, bool]]]], path: str, topic: str,
             row: tuple[int, int, int, bool]) -> None:
    """File one DescribeLogDirs row under its dir and topic (nothing for a dir not listed)."""
    by_topic = per_dir.get(path)
    if by_topic is not None:
        parts = by_topic.get(topic)
        if parts is None:
            by_topic[topic] = [row]
        else:
            parts.append(row)


class Logs:
    """Mixin of ClusterModel: log dirs, produce, fetch, offsets."""

    # ------------------------------------------------------------ replicas
    def _count_log(self, broker: int, path: str | None, delta: int) -> None:
        """Keep the number of logs (current and future replicas) per log dir up to date."""
        if path is not None:
            counts = self._dir_logs.setdefault(broker, {})
            counts[path] = counts.get(path, 0) + delta

    def _usage_changed(self, p: Partition, broker: int | None = None) -> None:
        """``p``'s replicas (and ``broker``'s, just removed) changed shape: recount them there."""
        dir_usage = self._dir_usage
        for b in p._reps:
            usage = dir_usage.get(b)
            if usage is not None:
                usage.stale[p] = None
        if broker is not None:
            usage = dir_usage.get(broker)
            if usage is not None:
                usage.stale[p] = None

    def _place(self, p: Partition, broker: int, path: str, tracking: bool) -> Replica:
        """Create the replica of ``p`` on ``broker`` in log dir ``path``."""
        r = Replica(p, broker, path, tracking, 0.0, self._t)
        p._reps[broker] = r
        self._by_broker[broker][p] = None
        self._count_log(broker, path, 1)
        self._usage_changed(p)
        return r

    def _pick_dir(self, broker: int) -> str:
        """Log dir for a new replica: LogManager.nextLogDirs, the uncordoned dir holding the fewest logs.

        A broker with every dir cordoned still takes a replica named to it (Kafka refuses no
        manual assignment or reassignment target): then any dir.
        """
        cordoned = self.cordoned_dirs(broker)
        dirs = [d for d in self.brokers[broker].log_dirs if d.path not in cordoned] or self.brokers[broker].log_dirs
        if len(dirs) == 1:
            return dirs[0].path
        counts = self._dir_logs.get(broker, {})
        # fewest logs; on a tie the first configured dir
        return min(dirs, key=lambda d: counts.get(d.path, 0)).path

    def _add_replica(self, p: Partition, broker: int) -> None:
        path = self._preferred_dirs.pop((broker, p.topic, p.index), None)
        self._place(p, broker, path or self._pick_dir(broker), False)

    def _remove_replica(self, p: Partition, broker: int) -> None:
        """Delete a replica and its data (and any future replica)."""
        r = p._reps.pop(broker, None)
        self._by_broker[broker].pop(p, None)
        if r is not None:
            self._count_log(broker, r.log_dir, -1)
            self._count_log(broker, r.future_log_dir, -1)
            self._usage_changed(p, broker)
        if broker in p.isr:
            p.isr.remove(broker)

    @locked
    def high_watermark(self, topic: str, partition: int) -> int:
        """High watermark of a partition (-1 if unknown).

        :param topic: topic name
        :param partition: partition index
        """
        p = self._part(topic, partition)
        return -1 if p is None else p.high_watermark()


    @locked
    def describe_log_dirs(self, broker_id: int, topics: list[tuple[str, list[int]]] | None = None
                          ) -> list[tuple[str, int, int, int, list[tuple[str, list[tuple[int, int, int, bool]]]]]]:
        """DescribeLogDirs of one broker.

        Current replicas report offset_lag = max(local HW - LEO, 0), which is always 0:
        ReplicaManager.getLogEndOffsetLag uses the broker's own high watermark, and a
        follower's is capped at its log end (UnifiedLog.updateHighWatermark), so even a
        follower far behind reports 0. Future replicas report how far they are behind the
        current replica (KIP-113).

        :param broker_id: the broker
        :param topics: (topic, partitions) to report, None for all
        """
        broker = self.brokers.get(broker_id)
        if broker is None:
            return []
        if topics is None:
            chosen: Iterable[Partition] = self._by_broker[broker_id]
        else:
            chosen = [p for p in dict.fromkeys(self._parts_of(topics)) if broker_id in p._reps]
        # Replicas in a dir the broker does not list are not reported: no bucket for them.
        per_dir: dict[str, dict[str, list[tuple[int, int, int, bool]]]] = {d.path: {} for d in broker.log_dirs}
        used = self.dir_used_bytes(broker_id)
        for p in chosen:
            r = p._reps[broker_id]
            _add_row(per_dir, r.log_dir, p.topic, (p.index, int(r.exact_bytes()), 0, False))
            if r.future_log_dir is not None:
                lag = max(0, r.log_end_offset - r.future_log_end_offset)
                _add_row(per_dir, r.future_log_dir, p.topic, (p.index, int(r.future_bytes), lag, True))
        out = []
        for d in broker.log_dirs:
            by_topic = per_dir[d.path]
            topics_out = [(name, by_topic[name]) for name in sorted(by_topic)]
            for _name, parts in topics_out:
                parts.sort()  # the lists are this answer's own: sorted where they are
            out.append((d.path, E.NONE, int(d.capacity_bytes),
                        int(max(0.0, d.capacity_bytes - used.get(d.path, 0.0))), topics_out))
        return out

    def _parts_of(self, topics: list[tuple[str, list[int]]]) -> list[Partition]:
        """The partitions named in a request, in its order, those that do not exist left out
        (``_part`` of each, without a call per partition: a poll names every one in flight)."""
        out: list[Partition] = []
        for t, indices in topics:
            topic = self.topics.get(t)
            if topic is not None:
                parts = topic.partitions
                n = len(parts)
                out.extend([parts[i] for i in indices if 0 <= i < n])
        return out

    def dir_used_bytes(self, broker_id: int) -> dict[str, float]:
        """Bytes held in each log dir of a broker (current and future replicas), now.

        DescribeLogDirs reports every dir's usable bytes, which a real broker reads from the
        file system in constant time. Walking every replica of the broker for it made each
        progress poll cost O(replicas per broker) here, so the walk is kept per broker
        (:class:`DirUsage`) and only the partitions that changed shape are counted again.
        """
        usage = self._dir_usage.get(broker_id)
        if usage is None:
            usage = self._dir_usage[broker_id] = DirUsage(broker_id, self._by_broker[broker_id])
        return usage.at(self._t)


    @locked
    def list_offsets(self, broker_id: int, topic: str, partition: int, timestamp: int
                     ) -> tuple[int, int, int, int]:
        """ListOffsets on the leader: -1 latest (HW), -2 earliest, -3 max timestamp, -4 earliest
        local (KIP-1005), else by time. A tiered topic (KIP-405) answers -1/-2/-4 from its bytes
        (:meth:`~kafka_sim.state.Partition.tiered_offsets`).

        :param broker_id: broker receiving the request
        :param topic: topic name
        :param partition: partition index
        :param timestamp: Kafka's timestamp selector
        :returns: (code, timestamp, offset, leader_epoch)
        """
        p = self._part(topic, partition)
        if p is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1
        if p.leader != broker_id or not self.brokers[broker_id].alive:
            return E.NOT_LEADER_OR_FOLLOWER, -1, -1, -1
        if self.topics[topic].configs.get("remote.storage.enable") == "true" and timestamp in (-1, -2, -4):
            start, local_start, end = p.tiered_offsets()
            return E.NONE, -1, {-2: start, -4: local_start, -1: end}[timestamp], p.leader_epoch
        if timestamp == -4:  # earliest local (KIP-1005): the whole log is local without tiering
            timestamp = -2
        if timestamp == -1:
            return E.NONE, -1, p.high_watermark(), p.leader_epoch
        if timestamp == -2:
            return E.NONE, -1, 0, p.leader_epoch
        if timestamp == -3:
            if not p._rec_maxts:
                return E.NONE, -1, -1, p.leader_epoch
            i = max(range(len(p._rec_maxts)), key=lambda j: p._rec_maxts[j])
            return E.NONE, p._rec_maxts[i], p._rec_end[i] - 1, p.leader_epoch
        for i, ts in enumerate(p._rec_maxts):
            if ts >= timestamp:
                return E.NONE, ts, p._rec_base[i], p.leader_epoch
        return E.NONE, -1, -1, p.leader_epoch

    # ------------------------------------------------------------ produce / fetch
    @staticmethod
    def _split_batches(data: bytes) -> list[tuple[int, int, int]] | None:
        """(start, end, record count) of each RecordBatch v2 in ``data``; None if malformed."""
        out = []
        pos = 0
        while pos < len(data):
            if len(data) - pos < _BATCH_HEADER:
                return None
            (length,) = struct.unpack_from(">i", data, pos + 8)
            end = pos + 12 + length
            if length < _BATCH_HEADER - 12 or end > len(data) or data[pos + 16] != 2:
                return None
            (last_delta,) = struct.unpack_from(">i", data, pos + 23)
            out.append((pos, end, last_delta + 1))
            pos = end
        return out

    @locked
    def append(self, broker_id: int, topic: str, partition: int, batch: bytes, record_count: int,
               acks: int) -> tuple[int, int, int]:
        """Produce record batches to the leader's log.

        :param broker_id: broker receiving the request (must lead the partition)
        :param topic: topic name
        :param partition: partition index
        :param batch: raw RecordBatch v2 bytes (one or more batches)
        :param record_count: records in ``batch`` (used when the header cannot say)
        :param acks: 0, 1 or -1; -1 requires len(ISR) >= min.insync.replicas
        :returns: (code, base_offset, end_offset); the server waits for HW >= end_offset on acks=-1
        """
        self._run(self.now())
        t = self.topics.get(topic)
        p = self._part(topic, partition)
        if t is None or p is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        if p.leader != broker_id or not self.brokers[broker_id].alive:
            return E.NOT_LEADER_OR_FOLLOWER, -1, -1
        if acks == -1 and len(p.isr) < self._min_isr(t):
            return E.NOT_ENOUGH_REPLICAS, -1, -1
        spans = self._split_batches(batch)
        if not spans:
            return E.CORRUPT_MESSAGE, -1, -1
        max_bytes = int(t.configs.get("max.message.bytes") or
                        self.configs.topic_fallback(None, TOPIC_CONFIGS["max.message.bytes"]) or 1048588)
        if any(end - start > max_bytes for start, end, _n in spans):
            return E.MESSAGE_TOO_LARGE, -1, -1
        # The cached physics plan stays valid: rates do not depend on how far behind a
        # follower is, and a longer gap only makes the planned event early (then re-planned);
        # only a throttled partition's quota changes it (_record_produced re-plans then).
        # A follower whose link cannot carry the produce rate is released before the log
        # grows, so these records are the first it lacks.
        self._produced_congestion(p, len(batch))
        self._rebase(p)
        base = p.leo
        before = p._base_bytes
        if p._rec_base is NO_RECORDS:
            p._rec_base, p._rec_end, p._rec_pos, p._rec_data, p._rec_maxts = [], [], [], [], []
        for start, end, count in spans:
            raw = bytearray(batch[start:end])
            struct.pack_into(">q", raw, 0, p.leo)
            struct.pack_into(">i", raw, 12, p.leader_epoch)  # partitionLeaderEpoch, outside the CRC
            (maxts,) = struct.unpack_from(">q", raw, 35)
            p._base_bytes += len(raw)
            p._rec_base.append(p.leo)
            p.leo += max(1, count)
            p._rec_end.append(p.leo)
            p._rec_pos.append(p._base_bytes)
            p._rec_data.append(bytes(raw))
            p._rec_maxts.append(maxts)
        self._usage_changed(p)  # the log jumped by the records' bytes
        self._record_produced(p, p._base_bytes - before)
        return E.NONE, base, p.leo

    @locked
    def read(self, broker_id: int, topic: str, partition: int, offset: int, max_bytes: int
             ) -> tuple[int, int, int, bytes]:
        """Fetch committed record batches from the leader.

        :param broker_id: broker receiving the request (must lead the partition)
        :param topic: topic name
        :param partition: partition index
        :param offset: first offset wanted
        :param max_bytes: soft cap; at least one batch is returned when any is available
        :returns: (code, high_watermark, log_start_offset, records)
        """
        p = self._part(topic, partition)
        if p is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, b""
        if p.leader != broker_id or not self.brokers[broker_id].alive:
            return E.NOT_LEADER_OR_FOLLOWER, -1, -1, b""
        hw = p.high_watermark()
        if offset < 0 or offset > p.leo:
            return E.OFFSET_OUT_OF_RANGE, hw, 0, b""
        i = bisect.bisect_right(p._rec_end, offset)
        out: list[bytes] = []
        total = 0
        while i < len(p._rec_end) and p._rec_end[i] <= hw:
            data = p._rec_data[i]
            if out and total + len(data) > max_bytes:
                break
            out.append(data)
            total += len(data)
            i += 1
        return E.NONE, hw, 0, b"".join(out)


    # ------------------------------------------------------------ log dirs (KIP-113)
    @locked
    def alter_replica_log_dirs(self, broker_id: int, items: list[tuple[str, str, int]]
                               ) -> list[tuple[str, int, int]]:
        """AlterReplicaLogDirs on one broker: move replicas between its log dirs.

        A replica the broker does not hold yet gets the dir remembered for when it is
        created (answer REPLICA_NOT_AVAILABLE, as Kafka does).

        :param broker_id: the broker
        :param items: (destination path, topic, partition)
        :returns: (topic, partition, code) per item
        """
        self._run(self.now())
        out = []
        broker = self.brokers.get(broker_id)
        for path, topic, index in items:
            if broker is None or not broker.alive:
                out.append((topic, index, E.KAFKA_STORAGE_ERROR))
                continue
            if path not in broker.dir_paths():
                out.append((topic, index, E.LOG_DIR_NOT_FOUND))
                continue
            if path in self.cordoned_dirs(broker_id):  # ReplicaManager.alterReplicaLogDirs (KIP-1066)
                out.append((topic, index, E.INVALID_REPLICA_ASSIGNMENT))
                continue
            p = self._part(topic, index)
            if p is None:
                out.append((topic, index, E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            r = p._reps.get(broker_id)
            if r is None:
                self._preferred_dirs[(broker_id, topic, index)] = path
                out.append((topic, index, E.REPLICA_NOT_AVAILABLE))
                continue
            if path == r.log_dir:
                self._count_log(broker_id, r.future_log_dir, -1)
                r.future_log_dir = None  # moving back home cancels a running copy
                r.future_bytes = 0.0
            elif r.future_log_dir != path:
                self._count_log(broker_id, r.future_log_dir, -1)
                self._count_log(broker_id, path, 1)
                r.future_log_dir = path
                r.future_bytes = 0.0
            self._usage_changed(p)
            self._touch(p)
            self.writes["AlterReplicaLogDirs"] += 1
            out.append((topic, index, E.NONE))
        self._flush_dirty()
        return out

