"""Handlers of replica administration: Alter/ListPartitionReassignments, DescribeLogDirs,
AlterReplicaLogDirs, ElectLeaders."""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterPartitionReassignmentsResponse, AlterReplicaLogDirsResponse, DescribeLogDirsResponse,
    ElectLeadersResponse,
)

from kafka_sim.errors import ELECTION_NOT_NEEDED, INVALID_REPLICATION_FACTOR, NONE
from kafka_sim.handlers.base import HandlerBase, RawBody, RequestContext
from kafka_sim.handlers.compact import reassignment_entry, reassignments_body


class ReplicaAdminHandlers(HandlerBase):
    """Reassignments (KIP-455), log dirs (KIP-113) and leader elections."""

    #: ListPartitionReassignments entries by partition: (its epoch when encoded, the bytes)
    _reassignment_entries: dict[Any, tuple[int, bytes]]

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
        """ListPartitionReassignments: in-flight moves with adding/removing replicas.

        Hand-encoded (v0, the only version), each partition's entry kept until the partition
        changes (its epoch): a rehearsal lists every move in flight at every wake, and most of
        them did not change since the last listing.
        """
        topics = ([(t.name, list(t.partition_indexes)) for t in request.topics]
                  if request.topics is not None else None)
        kept = self._reassignment_entries
        fresh: dict[Any, tuple[int, bytes]] = {}
        entries: list[tuple[str, bytes]] = []
        with self.model.lock:
            self.model.advance()
            for p in self.model.reassigning(topics):
                hit = kept.get(p)
                if hit is None or hit[0] != p.partition_epoch:
                    hit = (p.partition_epoch, reassignment_entry(p.index, p.replicas, p.adding, p.removing))
                fresh[p] = hit
                entries.append((p.topic, hit[1]))
        if topics is None:
            self._reassignment_entries = fresh  # what left the listing is forgotten
        else:
            kept.update(fresh)
        return RawBody(reassignments_body(entries), flexible=True)

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
            cordoned = self.model.cordoned_dirs(ctx.broker_id)  # IsCordoned: v5 (KIP-1066), ignored before
        results = []
        for path, code, total, usable, topic_rows in dirs:
            results.append(ResR(
                error_code=code, log_dir=path, total_bytes=total, usable_bytes=usable, is_cordoned=path in cordoned,
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
