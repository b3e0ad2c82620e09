"""Log-dir reads and moves of :class:`~kafka_reassign.cluster.admin.KafkaAdmin` (KIP-113:
DescribeLogDirs, AlterReplicaLogDirs): replica sizes, log dirs, intra-broker moves.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from kafka_reassign.cluster.calls import AdminConnection, error_name, log
from kafka_reassign.cluster.state import DirSpace, ReplicaLogDir, TopicPartition
from kafka_reassign.errors import KafkaAdminError


class LogDirAccess(AdminConnection):
    """Replicas' log dirs and sizes, brokers' dir capacities, moves between a broker's dirs."""

    def describe_log_dirs(self, broker_ids: Iterable[int] | None = None,
                          partitions: Iterable[TopicPartition] | Mapping[int, Iterable[TopicPartition]] | None = None
                          ) -> list[ReplicaLogDir]:
        """DescribeLogDirs rows (KIP-113), one per replica or future replica.

        A broker that does not answer is skipped with a warning: progress reports it as
        Unknown rather than failing the whole poll.

        :param broker_ids: brokers to ask (default: every live broker)
        :param partitions: restrict to these partitions (default all), or broker -> the
            partitions to ask that broker about (each request names only that broker's)
        """
        rows, _, _ = self._log_dirs_detail(broker_ids, partitions)
        return rows

    def _log_dirs_detail(self, broker_ids: Iterable[int] | None = None,
                         partitions: Iterable[TopicPartition] | Mapping[int, Iterable[TopicPartition]] | None = None
                         ) -> tuple[list[ReplicaLogDir], dict[int, dict[str, DirSpace]], dict[int, frozenset[str]]]:
        """(replica rows, {broker: {log dir: its total and usable bytes}}, {broker: cordoned log dirs})."""
        answers, dirs, cordoned = self._log_dir_answers(broker_ids, partitions)
        rows = [ReplicaLogDir(broker=b, path=d.log_dir, topic=t.name, partition=int(p.partition_index),
                              size=int(p.partition_size), offset_lag=int(p.offset_lag), is_future=bool(p.is_future_key))
                for b, results in answers.items() for d in results if not d.error_code
                for t in d.topics for p in t.partitions]
        return rows, dirs, cordoned

    def _log_dir_answers(self, broker_ids: Iterable[int] | None = None,
                         partitions: Iterable[TopicPartition] | Mapping[int, Iterable[TopicPartition]] | None = None
                         ) -> tuple[dict[int, list[Any]], dict[int, dict[str, DirSpace]], dict[int, frozenset[str]]]:
        """(each answering broker's decoded DescribeLogDirs results, its dirs' total and usable bytes,
        its cordoned dirs): :meth:`_log_dirs_detail` before its rows, which the cluster state does
        without (it reads sizes and dirs straight from the results: 400,000 rows at 300 brokers)."""
        if broker_ids is None:
            broker_ids = sorted(self.describe_cluster().alive)

        def by_topic(keys: Iterable[TopicPartition]) -> dict[str, list[int]]:
            out: dict[str, list[int]] = {}
            for t, p in keys:
                out.setdefault(t, []).append(p)
            return out

        if isinstance(partitions, Mapping):
            args: dict[int, dict[str, list[int]] | None] = {
                b: by_topic(partitions.get(b, ())) for b in broker_ids}
            args = {b: a for b, a in args.items() if a}
        else:
            shared = by_topic(partitions) if partitions is not None else None
            if shared is not None and not shared:
                return {}, {}, {}
            args = {b: shared for b in broker_ids}
        read: dict[int, list[Any]] = {}
        dirs: dict[int, dict[str, DirSpace]] = {}
        cordoned: dict[int, set[str]] = {}
        answers = self._log_dirs_at_once(args)
        for b, tp_arg in args.items():
            results = answers.get(b)
            if results is None:  # not answered in the concurrent round: alone, with retries
                try:
                    results = self._log_dirs_of(b, tp_arg)
                except KafkaAdminError as exc:
                    log.warning("DescribeLogDirs on broker %s failed: %s", b, exc)
                    continue
            # Read from the decoded results as they are: a poll of 300 brokers spent more in
            # kafka-python's to_dict() of every entry than in decoding them.
            read[b] = results
            for d in results:
                if d.error_code:
                    continue
                # KIP-827 (DescribeLogDirs v4+): the volume's size and free bytes; -1 before
                dirs.setdefault(b, {})[d.log_dir] = DirSpace(int(getattr(d, "total_bytes", -1) or -1),
                                                             int(getattr(d, "usable_bytes", -1)))
                if getattr(d, "is_cordoned", False):  # DescribeLogDirs v5 (KIP-1066, Kafka 4.3+); absent before
                    cordoned.setdefault(b, set()).add(d.log_dir)
        return read, dirs, {b: frozenset(c) for b, c in cordoned.items()}

    def _log_dirs_at_once(self, args: Mapping[int, dict[str, list[int]] | None]) -> dict[int, list[Any]]:
        """One DescribeLogDirs to every broker, all in flight together (one round trip per poll,
        not one per broker: a 300-broker cluster would otherwise spend seconds of each poll
        waiting): each broker's decoded results. Brokers that fail are left out; the caller asks
        them again one by one (:meth:`_log_dirs_of`).
        """
        if not args:
            return {}
        client = self._open
        manager = client._manager
        requests = {b: _log_dirs_request(client, a) for b, a in args.items()}

        async def ask_all() -> dict[int, list[Any]]:
            sent = {b: manager.send(req, node_id=b) for b, req in requests.items()}
            out: dict[int, list[Any]] = {}
            for b, future in sent.items():
                try:
                    out[b] = list((await future).results)
                except Exception as exc:  # noqa: BLE001 - retried alone by the caller
                    log.debug("DescribeLogDirs on broker %s (concurrent round): %s", b, exc)
            return out

        try:
            return self._within_deadline("DescribeLogDirs", manager.run, (ask_all,), {})
        except Exception as exc:  # noqa: BLE001 - fall back to asking one broker at a time
            log.debug("concurrent DescribeLogDirs failed: %s", exc)
            return {}

    def _log_dirs_of(self, broker: int, topics: dict[str, list[int]] | None) -> list[Any]:
        """One broker's DescribeLogDirs results, with retries (a broker the concurrent round missed)."""
        def attempt() -> list[Any]:
            client = self._open  # looked up at each try: a hung client is replaced between them
            request = _log_dirs_request(client, topics)

            async def ask() -> list[Any]:
                return list((await client._manager.send(request, node_id=broker)).results)
            return self._within_deadline("DescribeLogDirs", client._manager.run, (ask,), {})
        return self._retried("DescribeLogDirs", attempt, attempts=2)

    def alter_replica_log_dirs(self, moves: Mapping[tuple[str, int, int], str]
                               ) -> dict[tuple[str, int, int], str | None]:
        """Move replicas between log dirs of their broker (KIP-113).

        :param moves: {(topic, partition, broker): absolute log dir}
        :returns: {(topic, partition, broker): None on success, else the Kafka error name}
        """
        if not moves:
            return {}
        raw = self._call("AlterReplicaLogDirs", "alter_replica_log_dirs", dict(moves))
        out: dict[tuple[str, int, int], str | None] = {}
        for tpr, err in raw.items():
            name = error_name(err)
            out[(tpr.topic, tpr.partition, tpr.broker_id)] = None if getattr(err, "errno", None) == 0 or name in ("NoError", "NONE", "NO_ERROR") else name
        for key in moves:
            out.setdefault(key, "NO_RESPONSE")
        return out


def _log_dirs_request(client: Any, topics: dict[str, list[int]] | None) -> Any:
    """A DescribeLogDirs request of these partitions, or of every one (None).

    "Every partition" is a null topic list in the protocol (KIP-113); kafka-python's own call turns
    it into a Metadata request of every topic first, which at 500k replicas took longer than the
    request's deadline to decode.
    """
    from kafka.protocol.admin import DescribeLogDirsRequest
    return DescribeLogDirsRequest(topics=None if topics is None else client._get_topic_partitions(topics))
