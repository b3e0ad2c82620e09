"""The rehearsal's admin: :class:`KafkaAdmin` whose frequent requests are answered by the
simulated cluster in this process, without encoding them.

A rehearsal of 100,000 moves on 300 brokers sends tens of thousands of requests to its private
simulated cluster: a ListPartitionReassignments at every wake, a DescribeLogDirs to every broker
and a Metadata read of every moving topic at every full poll, a DescribeConfigs and an
IncrementalAlterConfigs at every refill. Encoding them and their answers on both sides of a
socket, in Python, was about half of the rehearsal's CPU (docs/REHEARSAL.md).

Everything KafkaAdmin does with an answer stays as it is: its retries, its error names, its
conversions to the domain's types. What is replaced is the kafka-python call under it: the
same model method the simulated broker's handler calls, under the model's lock, answered in
the shape kafka-python returns (``_call``), or the decoded response entries KafkaAdmin reads
(``_metadata_topics``, ``_log_dirs_at_once``). A request that involves a broker not answering
(stopped, frozen) goes over the wire as before, so its failure is the one a real run would
meet. Requests nobody sends often (describe cluster, offsets, elections, log-dir moves) always
go over the wire: every rehearsal still speaks the protocol.

``tests/integration/test_rehearsal_direct.py`` holds the two paths side by side: the same
calls on the same simulated cluster, over the wire and directly, give equal results, and a
rehearsal predicts the same moving time either way.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from kafka_reassign.cluster.admin import KafkaAdmin, partition_metadata_of
from kafka_reassign.cluster.log_dirs import note_dir
from kafka_reassign.cluster.metadata import PartitionMetadata
from kafka_reassign.cluster.state import DirSpace, InFlight, ReplicaLogDir, TopicPartition
from kafka_sim.errors import INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION
from kafka_sim.topics import valid_topic_name

#: KafkaAdminClient methods answered directly (the rest go over the wire).
DIRECT_METHODS = ("alter_partition_reassignments", "describe_configs", "alter_configs")
#: Kafka's config resource type of a broker (DescribeConfigs, IncrementalAlterConfigs).
_BROKER = 4
#: The answer could not be given here: send the request over the wire.
_WIRE = object()


class _Partition(NamedTuple):
    """A Metadata partition entry, with the decoded response's field names."""
    partition_index: int
    leader_id: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class _Topic(NamedTuple):
    """A Metadata topic entry."""
    name: str
    error_code: int
    is_internal: bool
    partitions: tuple[_Partition, ...]


class _ModelDirs(NamedTuple):
    """One broker's DescribeLogDirs as the model answers it (``Logs.describe_log_dirs``), read into
    rows as it is: building the decoded response's entries first cost as much as reading them."""
    dirs: list[tuple[str, int, int, int, list[tuple[str, list[tuple[int, int, int, bool]]]]]]
    cordoned: frozenset[str]


class DirectAdmin(KafkaAdmin):
    """KafkaAdmin of a :class:`kafka_sim.SimulatedCluster` served in this process.

    :param cluster: the started simulated cluster (nobody else may be connected to it: the
        direct path does not wake the served brokers' waiting fetches)
    :param kwargs: KafkaAdmin kwargs
    """

    def __init__(self, cluster: Any, **kwargs: Any) -> None:
        super().__init__(bootstrap_servers=cluster.bootstrap_servers, **kwargs)
        self._cluster = cluster
        self._model = cluster.model
        #: requests answered here, by operation (the rest went over the wire)
        self.direct_calls: Counter[str] = Counter()
        self._in_flight_kept: dict[Any, tuple[int, InFlight]] = {}

    # -- the seam: kafka-python's admin calls --------------------------------------------
    def _call(self, operation: str, method: str, *args: object, attempts: int | None = None,
              **kwargs: object) -> Any:
        if method in DIRECT_METHODS:
            answer = getattr(self, f"_direct_{method}")(*args, **kwargs)
            if answer is not _WIRE:
                self.direct_calls[operation] += 1
                return answer
        return super()._call(operation, method, *args, attempts=attempts, **kwargs)

    def _answering(self, broker_ids: Iterable[int]) -> bool:
        """Whether every one of these brokers answers requests (a stopped or frozen one does not)."""
        return all(self._cluster.answers(b) for b in broker_ids)

    def _locked(self, fn: Callable[[], Any]) -> Any:
        """``fn`` under the model's lock, the physics first brought to now (as a handler does)."""
        with self._model.lock:
            self._model.advance()
            return fn()

    # -- reassignments (KIP-455) ---------------------------------------------------------
    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, InFlight]:
        """Like KafkaAdmin's; each partition's entry is kept until its epoch changes (the executor
        lists every move in flight at every wake, and most did not change since the last one)."""
        if not self._answering_any():
            return super().list_partition_reassignments(partitions)
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            if not by_topic:
                return {}
            topics = list(by_topic.items())
        self.direct_calls["ListPartitionReassignments"] += 1
        kept, fresh = self._in_flight_kept, {}
        out: dict[TopicPartition, InFlight] = {}
        for p in self._locked(lambda: self._model.reassigning(topics)):
            hit = kept.get(p)
            if hit is None or hit[0] != p.partition_epoch:
                hit = (p.partition_epoch, InFlight(tuple(p.replicas), tuple(p.adding), tuple(p.removing)))
            fresh[p] = hit
            out[(p.topic, p.index)] = hit[1]
        if topics is None:
            self._in_flight_kept = fresh  # what left the listing is forgotten
        else:
            kept.update(fresh)
        return out

    def _direct_alter_partition_reassignments(self, reassignments: Mapping[Any, Any], timeout_ms: Any = None) -> Any:
        from kafka.admin import KafkaAdminClient
        from kafka.errors import for_code
        from kafka.structs import TopicPartition as KTP
        if not self._answering_any():
            return _WIRE
        request = KafkaAdminClient._process_alter_partition_reassignments_input(reassignments)  # its checks
        items = [(t.name, p.partition_index, p.replicas) for t in request for p in t.partitions]
        rows = self._model.alter_reassignments(items)
        return {KTP(t, p): (for_code(code) if code else None) for t, p, code, _msg in rows}

    # -- configs ---------------------------------------------------------------------------
    def _direct_describe_configs(self, config_resources: list[Any], include_synonyms: bool = False,
                                 config_filter: str = "modified") -> Any:
        from kafka.admin import ConfigSourceType
        if config_filter != "all" or not self._config_brokers_answer(config_resources):
            return _WIRE
        out: dict[str, dict[str, dict[str, Any]]] = {}
        with self._model.lock:  # as the handler: configs do not need the physics brought to now
            for res in config_resources:
                keys = list(res.configs) if res.configs is not None else None
                code, _msg, entries = self._model.describe_configs(int(res.resource_type), res.name, keys)
                # kafka-python keeps no result error: a resource that errs has no configs
                out.setdefault(res.resource_type.name.lower(), {})[res.name] = {
                    e.name: {"value": e.value, "read_only": e.read_only, "config_source": ConfigSourceType(e.source).name,
                             "is_sensitive": e.is_sensitive} for e in (entries if code == 0 else [])}
        return out

    def _direct_alter_configs(self, config_resources: list[Any], validate_only: bool = False,
                              raise_on_unknown: bool = True, incremental: Any = None) -> Any:
        from kafka.admin import KafkaAdminClient
        from kafka.errors import for_code
        if raise_on_unknown or incremental is not True or not self._config_brokers_answer(config_resources):
            return _WIRE  # kafka-python would first describe the configs, or use the legacy AlterConfigs
        out: dict[str, dict[str, str]] = {}
        with self._model.lock:
            for res in config_resources:
                ops = KafkaAdminClient._incremental_configs_entries(res.configs)  # its checks and DELETE's null
                code, msg = self._model.incremental_alter_configs(int(res.resource_type), res.name, ops, validate_only)
                out.setdefault(res.resource_type.name.lower(), {})[res.name] = "OK" if not code else str(for_code(code)(msg))
        return out

    def _config_brokers_answer(self, config_resources: Iterable[Any]) -> bool:
        """Whether the brokers a config request must reach answer (a broker's configs are read
        and written on that broker; topic configs on any)."""
        return self._answering_any() and self._answering(
            int(r.name) for r in config_resources if int(r.resource_type) == _BROKER)

    def _answering_any(self) -> bool:
        """Whether some broker answers (a request any broker may answer)."""
        return any(self._cluster.answers(b) for b in self._model.brokers)

    # -- metadata --------------------------------------------------------------------------
    def _metadata_topics(self, topics: list[str] | None) -> list:
        if not self._answering_any():
            return super()._metadata_topics(topics)
        self.direct_calls["Metadata"] += 1

        def read() -> list[_Topic]:
            alive = self._alive()
            return [self._topic_entry(n, alive) for n in (sorted(self._model.topics) if topics is None else topics)]
        return self._locked(read)

    def partition_metadata(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionMetadata]:
        """Like KafkaAdmin's, but only the wanted partitions are looked at (not their whole topics)."""
        keys = list(keys)
        if not keys or not self._answering_any():
            return super().partition_metadata(keys)
        self.direct_calls["Metadata"] += 1

        def read() -> dict[TopicPartition, PartitionMetadata]:
            alive = self._alive()
            out = {}
            for t, i in keys:
                topic = self._model.topics.get(t)
                if topic is not None and 0 <= i < len(topic.partitions):
                    out[(t, i)] = partition_metadata_of(_partition_entry(topic.partitions[i], alive))
            return out
        return self._locked(read)

    def _topic_entry(self, name: str, alive: set[int]) -> _Topic:
        """One topic as the simulated broker's Metadata handler answers it."""
        topic = self._model.topics.get(name)
        if topic is None:
            code = UNKNOWN_TOPIC_OR_PARTITION if valid_topic_name(name) else INVALID_TOPIC_EXCEPTION
            return _Topic(name, code, False, ())
        return _Topic(name, 0, bool(topic.internal), tuple(_partition_entry(p, alive) for p in topic.partitions))

    def _alive(self) -> set[int]:
        return {b for b, br in self._model.brokers.items() if br.alive}

    # -- log dirs (KIP-113) ----------------------------------------------------------------
    def _log_dirs_at_once(self, args: Mapping[int, dict[str, list[int]] | None]) -> dict[int, Any]:
        """Each answering broker's DescribeLogDirs results; the others are left out, and KafkaAdmin
        asks them over the wire (where they fail as they would on a real cluster)."""
        model = self._model
        answering = {b: a for b, a in args.items() if self._cluster.answers(b)}
        if answering:
            self.direct_calls["DescribeLogDirs"] += len(answering)

        def read() -> dict[int, _ModelDirs]:
            return {b: _ModelDirs(model.describe_log_dirs(b, None if a is None else list(a.items())),
                                  model.cordoned_dirs(b)) for b, a in answering.items()}
        return self._locked(read) if answering else {}

    def _read_log_dirs(self, b: int, results: Any, rows: list[ReplicaLogDir], dirs: dict[int, dict[str, DirSpace]],
                       cordoned: dict[int, set[str]]) -> None:
        """:meth:`LogDirAccess._read_log_dirs` of an answer from the model (or, over the wire, a decoded one)."""
        if not isinstance(results, _ModelDirs):  # asked over the wire: decoded results
            super()._read_log_dirs(b, results, rows, dirs, cordoned)
            return
        for path, code, total, usable, topic_rows in results.dirs:
            if code:
                continue
            note_dir(b, path, total, usable, path in results.cordoned, dirs, cordoned)
            rows.extend(ReplicaLogDir(b, path, name, index, size, lag, future)
                        for name, parts in topic_rows for index, size, lag, future in parts)


def _partition_entry(p: Any, alive: set[int]) -> _Partition:
    """A partition as Metadata answers it: KRaft names a leader only while it is alive."""
    replicas = tuple(p.replicas)
    return _Partition(p.index, p.leader if p.leader in alive else -1, replicas, tuple(p.isr),
                      tuple(b for b in replicas if b not in alive))


__all__ = ["DirectAdmin", "DIRECT_METHODS"]
