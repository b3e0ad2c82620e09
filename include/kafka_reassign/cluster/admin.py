"""The one place that talks to Kafka: a thin, retrying layer over kafka-python's KafkaAdminClient.

Everything returned is typed plain data (the dataclasses of :mod:`kafka_reassign.cluster.metadata`,
:mod:`kafka_reassign.cluster.state` and :mod:`kafka_reassign.cluster.config_source`, dicts keyed by
``(topic, partition)``): no kafka-python type or raw response dict leaves this package.
:class:`KafkaAdmin` satisfies :class:`kafka_reassign.cluster.port.KafkaAdminPort`, the type the
domain code takes.

Its parts: the connection and retries (:mod:`~kafka_reassign.cluster.calls`), config reads and
writes (:mod:`~kafka_reassign.cluster.configs`), log dirs
(:mod:`~kafka_reassign.cluster.log_dirs`); here metadata, the cluster state, reassignments,
offsets and leader elections.

Errors: transient ones (timeouts, NOT_CONTROLLER, connection errors, anything kafka-python
marks ``retriable``) are retried with tenacity (exponential back-off, bounded attempts and
time). Permanent ones raise :class:`~kafka_reassign.errors.KafkaAdminError` carrying the
Kafka error name (``INVALID_REPLICA_ASSIGNMENT``...). Per-partition errors of batch calls
(AlterPartitionReassignments, AlterReplicaLogDirs, ElectLeaders) are *returned*, not
raised, so a caller can report every partition.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from kafka_reassign.cluster.calls import (KIP455_APIS, SECRET_KWARGS, TRANSIENT_PARTITION_ERRORS,
                                          UnsupportedClusterError, error_name, is_transient, log, redact)
from kafka_reassign.cluster.configs import ConfigAccess
from kafka_reassign.cluster.config_source import ConfigChangeLike, ConfigsRead
from kafka_reassign.cluster.log_dirs import LogDirAccess
from kafka_reassign.cluster.metadata import BrokerNode, ClusterDescription, PartitionMetadata, TopicMetadata
from kafka_reassign.cluster.tiered import EARLIEST, EARLIEST_LOCAL, EARLIEST_LOCAL_VERSION, LATEST, TieredOffsets
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.cluster.state import (BrokerInfo, ClusterState, DirSpace, InFlight, PartitionInfo,
                                          ReplicaLogDir, TopicInfo, TopicPartition)

#: Per topic: partition index -> its Metadata.
TopicPartitions = dict[str, dict[int, PartitionMetadata]]


def partition_metadata_of(p: Any) -> PartitionMetadata:
    """A decoded Metadata partition entry as plain data (the rehearsal's in-process answers too)."""
    return PartitionMetadata(partition=int(p.partition_index), leader=int(p.leader_id),
                             replicas=tuple(p.replica_nodes or ()), isr=tuple(p.isr_nodes or ()),
                             offline=tuple(p.offline_replicas or ()))


def _readable_topics(metas: Iterable[TopicMetadata]) -> tuple[TopicPartitions, dict[str, bool], set[int]]:
    """Topics Metadata answered without an error: their partitions, internal flags, every replica named."""
    partitions: TopicPartitions = {}
    internal: dict[str, bool] = {}
    referenced: set[int] = set()
    for t in metas:
        if t.error is not None:
            continue
        internal[t.name] = t.internal
        parts = partitions.setdefault(t.name, {})
        for p in t.partitions:
            parts[p.partition] = p
            referenced.update(p.replicas)
    return partitions, internal, referenced


def _placement(rows: Iterable[ReplicaLogDir]
               ) -> tuple[dict[tuple[str, int, int], int], dict[tuple[str, int], dict[int, str]]]:
    """Current replicas' sizes by (topic, partition, broker) and dirs by (topic, partition) (future ones skipped)."""
    sizes: dict[tuple[str, int, int], int] = {}
    dirs: dict[tuple[str, int], dict[int, str]] = {}
    # Unpacked, not read field by field (a descriptor call each): this walks every replica of the cluster.
    for broker, path, topic, partition, size, _lag, is_future in rows:
        if is_future:
            continue
        sizes[(topic, partition, broker)] = size
        dirs.setdefault((topic, partition), {})[broker] = path
    return sizes, dirs


def _brokers(alive: Mapping[int, BrokerNode], referenced: set[int],
             broker_dirs: Mapping[int, dict[str, DirSpace]],
             cordoned: Mapping[int, frozenset[str]] | None = None) -> dict[int, BrokerInfo]:
    """Every live broker and every broker a replica names (a dead one is known, not alive)."""
    brokers: dict[int, BrokerInfo] = {}
    for bid in sorted(set(alive) | referenced):
        info = alive.get(bid)
        space = broker_dirs.get(bid, {})
        brokers[bid] = BrokerInfo(id=bid, rack=info.rack if info else None, alive=info is not None,
                                  log_dirs=tuple(sorted(space)),
                                  capacity_bytes={d: s.total for d, s in space.items()},
                                  usable_bytes={d: s.usable for d, s in space.items() if s.usable >= 0},
                                  cordoned_dirs=(cordoned or {}).get(bid, frozenset()))
    return brokers


def _topic_info(name: str, partitions: Mapping[int, PartitionMetadata], alive: Mapping[int, BrokerNode],
                rows: Iterable[ReplicaLogDir], internal: bool, configs: dict[str, str]) -> TopicInfo:
    """One topic of the cluster state; a partition's size is its leader's (else its largest replica's)."""
    sizes, dirs = _placement(rows)
    parts_out: dict[int, PartitionInfo] = {}
    for idx, p in sorted(partitions.items()):
        replicas, leader = p.replicas, p.leader
        offline = p.offline or tuple(r for r in replicas if r not in alive)
        size = sizes.get((name, idx, leader))
        if size is None:
            size = max((sizes.get((name, idx, r), 0) for r in replicas), default=0)
        parts_out[idx] = PartitionInfo(topic=name, partition=idx, replicas=replicas, isr=p.isr, leader=leader,
                                       offline=offline, size_bytes=int(size), replica_dirs=dirs.get((name, idx), {}))
    return TopicInfo(name=name, partitions=parts_out, internal=internal, configs=configs)


class KafkaAdmin(ConfigAccess, LogDirAccess):
    """Admin operations the reassignment needs, over one KafkaAdminClient.

    :param kwargs: kafka-python KafkaAdminClient kwargs (bootstrap_servers, security_protocol,
        sasl_mechanism, sasl_plain_username, sasl_plain_password, ssl_cafile, ssl_certfile,
        ssl_keyfile, ssl_password, ssl_check_hostname, request_timeout_ms, client_id, ...) plus
        ``retry_attempts`` (default 5), ``retry_max_seconds`` (default 60) and
        ``call_timeout_seconds`` (how long one try may wait before the client is replaced)
    """

    # -- reads -----------------------------------------------------------------------
    def topic_metadata(self, topics: list[str] | None = None) -> list[TopicMetadata]:
        """Metadata of ``topics`` (all when None)."""
        from kafka.errors import for_code
        out = []
        for t in self._retried("Metadata", lambda: self._metadata_topics(topics)):
            parts = tuple(partition_metadata_of(p) for p in t.partitions or ())
            code = t.error_code or 0
            out.append(TopicMetadata(name=t.name, partitions=parts, internal=bool(t.is_internal),
                                     error=error_name(for_code(code)) if code else None))
        return out

    def partition_metadata(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionMetadata]:
        """Metadata of these partitions only: their topics are read whole (Metadata cannot name a
        partition), but only the wanted entries are built (the executor reads a few partitions
        of each of a thousand topics)."""
        wanted: dict[str, set[int]] = {}
        for t, p in keys:
            wanted.setdefault(t, set()).add(p)
        if not wanted:
            return {}
        out = {}
        for t in self._retried("Metadata", lambda: self._metadata_topics(sorted(wanted))):
            mine = wanted.get(t.name, ())
            for p in t.partitions or ():
                if p.partition_index in mine:
                    out[(t.name, int(p.partition_index))] = partition_metadata_of(p)
        return out

    def _metadata_topics(self, topics: list[str] | None) -> list:
        """One Metadata request, its topic entries as decoded. Sent without kafka-python's
        ``describe_topics``, which turns the whole answer into dicts and asks for ACL operations:
        the executor's health read of a thousand topics spent more time there than decoding."""
        from kafka.protocol.metadata import MetadataRequest
        manager = self._open._manager
        wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        request = MetadataRequest(topics=wanted, allow_auto_topic_creation=False)

        async def ask() -> list:
            return list((await manager.send(request)).topics)
        return self._within_deadline("Metadata", manager.run, (ask,), {})

    def cluster_state(self, include_log_dirs: bool = True, topics: list[str] | None = None) -> ClusterState:
        """Read brokers, topics (replicas, ISR, leader, offline), min ISR, sizes, log dirs, in-flight moves.

        :param include_log_dirs: also call DescribeLogDirs on every live broker (sizes, dirs)
        :param topics: restrict topics (default all)
        """
        cluster = self.describe_cluster()
        # In-flight moves first: one that completes before Metadata is read still carries its
        # own full replica list here, while one read after could show old + new replicas
        # in Metadata with nothing in flight (a spurious replication-factor change).
        in_flight = self.list_partition_reassignments()
        partitions, internal, referenced = _readable_topics(self.topic_metadata(topics))
        alive = cluster.alive
        topic_names = sorted(partitions)
        configs = self._topic_min_isr(topic_names)
        default_min_isr = self._broker_default_min_isr(next(iter(alive), None))
        replica_rows: list[ReplicaLogDir] = []
        broker_dirs: dict[int, dict[str, DirSpace]] = {}
        cordoned: dict[int, frozenset[str]] = {}
        if include_log_dirs and alive:
            replica_rows, broker_dirs, cordoned = self._log_dirs_detail(sorted(alive))
        by_topic: dict[str, list[ReplicaLogDir]] = {}
        for r in replica_rows:
            by_topic.setdefault(r.topic, []).append(r)
        topics_out = {name: _topic_info(name, partitions[name], alive, by_topic.get(name, []),
                                        internal.get(name, False), configs.get(name, {})) for name in topic_names}
        return ClusterState(brokers=_brokers(alive, referenced, broker_dirs, cordoned), topics=topics_out, in_flight=in_flight,
                            cluster_id=cluster.cluster_id, controller_id=cluster.controller_id,
                            default_min_isr=default_min_isr)

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, InFlight]:
        """Ongoing reassignments (all, or of ``partitions``)."""
        arg = None
        if partitions is not None:
            from kafka.structs import TopicPartition as KTP
            arg = [KTP(t, p) for t, p in partitions]
            if not arg:
                return {}
        raw = self._call("ListPartitionReassignments", "list_partition_reassignments", arg)
        return {(tp.topic, tp.partition): InFlight(tuple(v["replicas"]), tuple(v["adding_replicas"]),
                                                   tuple(v["removing_replicas"]))
                for tp, v in raw.items()}
    def list_offsets(self, partitions: Iterable[TopicPartition], latest: bool = True) -> dict[TopicPartition, int]:
        """Log-end (or log-start) offsets from the partitions' leaders (ListOffsets).

        A partition whose leader answers with an error (offline, leader moving) is left out:
        callers sample twice and compare, so a missing partition is "not measured", never 0.

        :param partitions: (topic, partition) pairs
        :param latest: log-end offsets; False for log-start offsets
        """
        return self._offsets(list(partitions), LATEST if latest else EARLIEST)

    def tiered_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, TieredOffsets]:
        """Log-start, earliest-local and log-end offsets of tiered partitions (KIP-405, KIP-1005).

        Empty (with a warning) when the brokers lack ListOffsets v8, which answers the
        earliest local offset: remote bytes are then not known, not 0 by measurement.

        :param partitions: (topic, partition) pairs of tiered topics
        """
        keys = list(partitions)
        if not keys:
            return {}
        version = self.max_api_version(2)  # ListOffsets
        if version is not None and version < EARLIEST_LOCAL_VERSION:
            log.warning("brokers answer ListOffsets up to v%s, earliest-local offsets need v%s (Kafka 3.6+): "
                        "remote bytes of tiered topics are not measured", version, EARLIEST_LOCAL_VERSION)
            return {}
        start, local, end = (self._offsets(keys, spec) for spec in (EARLIEST, EARLIEST_LOCAL, LATEST))
        return {k: TieredOffsets(start[k], local[k], end[k]) for k in keys
                if k in start and k in local and k in end}

    def batch_sizes(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, float]:
        """Median bytes of each log's first record batches (a consumer on this connection's settings).

        :param partitions: (topic, partition) pairs with non-empty logs
        """
        from kafka_reassign.cluster.batches import batch_sizes
        return batch_sizes(self._kwargs, partitions)

    def group_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """Every consumer group's committed offsets (ListGroups on every broker, OffsetFetch per
        coordinator); a partition without a committed offset is left out.

        Raises KafkaAdminError (``UNSUPPORTED_VERSION`` when the brokers lack ListGroups): the
        caller decides whether consumption is worth a failure.
        """
        if self.max_api_version(16) == -1:  # ListGroups; a broker without it closes the connection
            raise KafkaAdminError("ListGroups", "UNSUPPORTED_VERSION", "the brokers do not answer ListGroups")
        groups = self._call("ListGroups", "list_groups")
        # share groups' and Connect's positions are not OffsetFetch's (and fail the whole request)
        ids = sorted({str(g["group_id"]) for g in groups if g.get("protocol_type", "") in ("consumer", "")})
        if not ids:
            return {}
        raw = self._call("OffsetFetch", "list_group_offsets", {g: None for g in ids})
        return {g: {(tp.topic, tp.partition): int(v.offset) for tp, v in offsets.items() if v.offset >= 0}
                for g, offsets in raw.items()}

    def _offsets(self, keys: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        """ListOffsets of ``keys`` at one timestamp selector; partitions that err are left out."""
        from kafka.admin import OffsetSpec
        from kafka.structs import TopicPartition as KTP
        if not keys:
            return {}
        try:
            raw = self._call("ListOffsets", "list_partition_offsets",
                             {KTP(t, p): OffsetSpec(spec) for t, p in keys})
        except KafkaAdminError as exc:
            if len(keys) == 1:
                log.warning("ListOffsets for %s-%s: %s", keys[0][0], keys[0][1], exc)
                return {}
            out: dict[TopicPartition, int] = {}
            for key in keys:  # one bad partition fails the whole call in kafka-python: ask one by one
                out.update(self._offsets([key], spec))
            return out
        return {(tp.topic, tp.partition): int(v.offset) for tp, v in raw.items()}

    # -- writes ----------------------------------------------------------------------
    def alter_partition_reassignments(self, targets: Mapping[TopicPartition, Iterable[int] | None]
                                      ) -> dict[TopicPartition, str | None]:
        """Start (replicas list) or cancel (None) reassignments; per-partition error names.

        :returns: {(topic, partition): None on success, else the Kafka error name}
        """
        if not targets:
            return {}
        from kafka.structs import TopicPartition as KTP
        out: dict[TopicPartition, str | None] = {}
        todo = dict(targets)
        # Per-partition transient errors (REQUEST_TIMED_OUT, NOT_CONTROLLER...) are retried for
        # those partitions only; submitting the same target again is idempotent.
        for attempt in range(self.retry_attempts):
            arg = {KTP(t, p): (list(r) if r is not None else None) for (t, p), r in todo.items()}
            raw = self._call("AlterPartitionReassignments", "alter_partition_reassignments", arg)
            retry: dict[TopicPartition, Iterable[int] | None] = {}
            for tp, err in raw.items():
                key = (tp.topic, tp.partition)
                out[key] = None if err is None else error_name(err)
                if err is not None and out[key] in TRANSIENT_PARTITION_ERRORS and attempt + 1 < self.retry_attempts:
                    retry[key] = todo[key]
            if not retry:
                break
            log.warning("AlterPartitionReassignments: transient errors for %s, retrying",
                        ", ".join(f"{t}-{p}: {out[(t, p)]}" for t, p in retry))
            time.sleep(min(5.0, 0.2 * 2 ** attempt))
            todo = retry
        for key in targets:
            out.setdefault(key, "NO_RESPONSE")
        return out
    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]:
        """Preferred leader election; ELECTION_NOT_NEEDED counts as success.

        :returns: {(topic, partition): None or Kafka error name}
        """
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        if not by_topic:
            return {}
        from kafka.errors import for_code
        resp = self._call("ElectLeaders", "elect_leaders", 0, by_topic, raise_errors=False)
        out: dict[TopicPartition, str | None] = {}
        for res in getattr(resp, "replica_election_results", []):
            for pr in res.partition_result:
                name = error_name(for_code(pr.error_code)) if pr.error_code else None
                out[(res.topic, pr.partition_id)] = None if name in (None, "ELECTION_NOT_NEEDED") else name
        return out

__all__ = ["KafkaAdmin", "partition_metadata_of", "ConfigsRead", "ConfigChangeLike", "ClusterDescription",
           "BrokerNode", "TopicMetadata", "PartitionMetadata", "UnsupportedClusterError", "error_name", "is_transient",
           "redact", "TRANSIENT_PARTITION_ERRORS", "KIP455_APIS", "SECRET_KWARGS"]

if TYPE_CHECKING:  # mypy proves KafkaAdmin implements the port the domain takes
    from kafka_reassign.cluster.port import KafkaAdminPort
    _implements_port: type[KafkaAdminPort] = KafkaAdmin
