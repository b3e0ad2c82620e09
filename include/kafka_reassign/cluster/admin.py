"""The one place that talks to Kafka: a thin, retrying layer over kafka-python's KafkaAdminClient.

Everything returned is typed plain data (the dataclasses here and in
:mod:`kafka_reassign.cluster.state`, dicts keyed by ``(topic, partition)``): no kafka-python type or
raw response dict leaves this module.

Errors: transient ones (timeouts, NOT_CONTROLLER, connection errors, anything kafka-python
marks ``retriable``) are retried with tenacity (exponential back-off, bounded attempts and
time). Permanent ones raise :class:`~kafka_reassign.errors.KafkaAdminError` carrying the
Kafka error name (``INVALID_REPLICA_ASSIGNMENT``...). Per-partition errors of batch calls
(AlterPartitionReassignments, AlterReplicaLogDirs, ElectLeaders) are *returned*, not
raised, so a caller can report every partition.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, TypeVar

from tenacity import (RetryError, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay,
                      wait_exponential)

from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.cluster.state import (BrokerInfo, ClusterState, InFlight, PartitionInfo, ReplicaLogDir,
                                  TopicInfo, TopicPartition)
from kafka_reassign.throttle.specs import INHERITED_SOURCES, Inherited

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Keys of ours, not kafka-python's.
_OWN_KWARGS = ("retry_attempts", "retry_max_seconds")
#: Per-partition errors worth retrying (kafka-python marks UNKNOWN_TOPIC_OR_PARTITION retriable,
#: but for a reassignment of a partition that does not exist it is final).
TRANSIENT_PARTITION_ERRORS = frozenset({"REQUEST_TIMED_OUT", "NOT_CONTROLLER", "NETWORK_EXCEPTION",
                                        "THROTTLING_QUOTA_EXCEEDED", "LEADER_NOT_AVAILABLE"})
#: KIP-455 (Kafka 2.4+): without these no reassignment can be started, watched or cancelled.
KIP455_APIS = {45: "AlterPartitionReassignments", 46: "ListPartitionReassignments"}
#: Secret-bearing kwargs never logged.
SECRET_KWARGS = frozenset({"sasl_plain_password", "ssl_password", "sasl_oauth_token_provider", "ssl_context"})


def error_name(err: object) -> str:
    """Kafka's name for an error class or instance (``NOT_CONTROLLER``), else the class name."""
    cls = err if isinstance(err, type) else type(err)
    msg = getattr(cls, "message", None)
    if isinstance(msg, str) and msg and msg.upper() == msg:
        return msg
    return cls.__name__


def is_transient(exc: BaseException) -> bool:
    """Whether retrying may help: timeouts, connection problems, controller moves."""
    from kafka import errors as kerrors
    no_brokers = getattr(kerrors, "NoBrokersAvailable", None)  # gone in kafka-python 3
    if no_brokers is not None and isinstance(exc, no_brokers):
        return True
    if isinstance(exc, kerrors.KafkaError):
        return bool(getattr(exc, "retriable", False))
    if isinstance(exc, RuntimeError) and "controller" in str(exc).lower():
        return True  # kafka-python's "Failed to find active controller id!" after NOT_CONTROLLER twice
    return isinstance(exc, (OSError, TimeoutError, ConnectionError))


def redact(kwargs: Mapping[str, object]) -> dict[str, object]:
    """A copy of admin kwargs safe to log."""
    return {k: ("***" if k in SECRET_KWARGS and v is not None else v) for k, v in kwargs.items()}


class UnsupportedClusterError(KafkaAdminError):
    """The brokers lack KIP-455 (Kafka older than 2.4): refused while connecting, before any write.

    ``str()`` is one line, what the CLI prints (exit 2).
    """

    def __init__(self, missing: Iterable[str]) -> None:
        super().__init__("ApiVersions", "UNSUPPORTED_VERSION",
                         f"this cluster's brokers do not support KIP-455 reassignments ({', '.join(missing)}, "
                         "Kafka 2.4+); nothing was written: upgrade the brokers to Kafka 2.4 or later")

    def __str__(self) -> str:
        return self.detail


class ConfigChangeLike(Protocol):
    """What :meth:`KafkaAdmin.alter_configs` needs of a change (a throttle ConfigChange)."""

    resource_type: str
    name: str
    key: str
    value: str | None


@dataclass
class ConfigsRead:
    """Dynamic config values read, and the resources that could not be read.

    :param values: {("broker", "1"): {key: value or None}, ("topic", "t"): {...}}
    :param unreachable: {(resource_type, name): error} of resources not read
    :param inherited: {("broker", "1"): {key: Inherited}}: values a broker enforces without a
        per-broker value of its own (the cluster-wide default, or its static config)
    """

    values: dict[tuple[str, str], dict[str, str | None]]
    unreachable: dict[tuple[str, str], str]
    inherited: dict[tuple[str, str], dict[str, Inherited]] = field(default_factory=dict)


@dataclass(frozen=True)
class BrokerNode:
    """A broker of DescribeCluster.

    :param fenced: registered but fenced by the controller (KRaft): not alive
    """

    id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False


@dataclass(frozen=True)
class ClusterDescription:
    """DescribeCluster: the cluster id, the controller and the registered brokers."""

    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerNode, ...]

    @property
    def alive(self) -> dict[int, BrokerNode]:
        """Brokers not fenced, by id."""
        return {b.id: b for b in self.brokers if not b.fenced}


@dataclass(frozen=True)
class PartitionMetadata:
    """One partition of a Metadata response (replicas with the preferred leader first)."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicMetadata:
    """One topic of a Metadata response.

    :param error: Kafka error name (e.g. UNKNOWN_TOPIC_OR_PARTITION), None when fine
    """

    name: str
    partitions: tuple[PartitionMetadata, ...]
    internal: bool = False
    error: str | None = None


class KafkaAdmin:
    """Admin operations the reassignment needs, over one KafkaAdminClient.

    :param kwargs: kafka-python KafkaAdminClient kwargs (bootstrap_servers, security_protocol,
        sasl_mechanism, sasl_plain_username, sasl_plain_password, ssl_cafile, ssl_certfile,
        ssl_keyfile, ssl_password, ssl_check_hostname, request_timeout_ms, client_id, ...) plus
        ``retry_attempts`` (default 5) and ``retry_max_seconds`` (default 60)
    """

    def __init__(self, **kwargs: object) -> None:
        self.retry_attempts = int(kwargs.pop("retry_attempts", 5))
        self.retry_max_seconds = float(kwargs.pop("retry_max_seconds", 60.0))
        kwargs.setdefault("client_id", "kafka-reassign")
        kwargs.setdefault("bootstrap_timeout_ms", 10_000)
        kwargs.setdefault("request_timeout_ms", 30_000)
        # kafka-python backs off up to 30 s from a broker that refused connections: a broker
        # back from a restart would stay unreadable that long (its lag read as a stall).
        kwargs.setdefault("reconnect_backoff_max_ms", 1_000)
        self._kwargs = kwargs
        self._client = None
        log.debug("KafkaAdmin(%s)", redact(kwargs))
        # Bootstrapping already retries for bootstrap_timeout_ms; retrying that again only delays the error.
        self._client = self._call("connect", self._connect, attempts=1)
        self._require_kip455()

    def _connect(self) -> "KafkaAdminClient":
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError

        from kafka_reassign.cluster.client_logs import SecurityErrors
        with SecurityErrors() as refused:
            try:
                return KafkaAdminClient(**self._kwargs)
            except KafkaError as exc:
                if not getattr(exc, "retriable", False):
                    raise
                where = f"cannot reach Kafka at {self._kwargs.get('bootstrap_servers')}"
                if refused.last:  # reachable, but the login or the TLS handshake was refused
                    raise KafkaAdminError("connect", error_name(exc), f"{where}: the brokers refused the "
                                          f"connection's credentials or TLS settings: {refused.last}") from exc
                raise KafkaAdminError("connect", error_name(exc), f"{where} within "
                                      f"{self._kwargs.get('bootstrap_timeout_ms')} ms: {exc}") from exc

    def _require_kip455(self) -> None:
        """Refuse a cluster without KIP-455 now, before any caller reads or writes.

        Reads the ApiVersions answer kafka-python got while bootstrapping: no extra request.
        """
        manager = getattr(self._client, "_manager", None)
        versions = getattr(getattr(manager, "broker_version_data", None), "api_versions", None)
        if versions is None:  # not known: the reassignment requests themselves will fail
            return
        missing = [name for key, name in KIP455_APIS.items() if key not in versions]
        if missing:
            self.close()
            raise UnsupportedClusterError(missing)

    @property
    def client(self) -> "KafkaAdminClient | None":
        """The underlying kafka-python KafkaAdminClient (for tests and diagnostics)."""
        return self._client

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None

    def __enter__(self) -> "KafkaAdmin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- retry wrapper ---------------------------------------------------------------
    def _retry_worthy(self, exc: BaseException) -> bool:
        """Transient errors, and a broker missing from the client's cached broker list.

        kafka-python keeps the broker list of its last metadata response for up to
        ``metadata_max_age_ms`` (5 min): a broker that restarted meanwhile is unknown to it
        and every request to it fails with UnknownBrokerIdError. Refresh and try again.
        """
        if type(exc).__name__ in ("UnknownBrokerIdError", "NodeNotReadyError", "KafkaConnectionError"):
            # The controller kafka-python remembers may be the broker that went away: find it again.
            if getattr(self._client, "_controller_id", None) is not None:
                self._client._controller_id = None
        if type(exc).__name__ == "UnknownBrokerIdError":
            self.refresh_metadata()
            return True
        return is_transient(exc)

    def refresh_metadata(self) -> None:
        """Ask for a new broker list now (best effort: a failure leaves the old one)."""
        manager = getattr(self._client, "_manager", None)
        if manager is None:
            return
        try:
            manager.run(manager.cluster.refresh_metadata)
        except Exception as exc:  # noqa: BLE001 - the retried call reports the real error
            log.debug("metadata refresh failed: %s", exc)

    def _call(self, operation: str, fn: Callable[..., T], *args: object, attempts: int | None = None,
              **kwargs: object) -> T:
        retrying = Retrying(
            retry=retry_if_exception(self._retry_worthy),
            stop=stop_after_attempt(attempts or self.retry_attempts) | stop_after_delay(self.retry_max_seconds),
            wait=wait_exponential(multiplier=0.2, min=0.2, max=5.0),
            reraise=False,
            before_sleep=lambda rs: log.warning("%s: transient error (%s), retry %d", operation,
                                                rs.outcome.exception(), rs.attempt_number),
        )
        try:
            return retrying(fn, *args, **kwargs)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            raise KafkaAdminError(operation, error_name(last),
                                  f"still failing after {exc.last_attempt.attempt_number} attempts: {last}") from last
        except KafkaAdminError:
            raise
        except Exception as exc:  # noqa: BLE001 - translate kafka-python errors, keep ours
            from kafka.errors import KafkaError
            if isinstance(exc, KafkaError) or isinstance(exc, (OSError, RuntimeError)):
                raise KafkaAdminError(operation, error_name(exc), str(exc)) from exc
            raise

    # -- reads -----------------------------------------------------------------------
    def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the controller and every registered broker."""
        raw = self._call("DescribeCluster", self._client.describe_cluster)
        brokers = tuple(BrokerNode(id=int(b["broker_id"]), host=str(b.get("host", "")), port=int(b.get("port", 0)),
                                   rack=b.get("rack"), fenced=bool(b.get("is_fenced", False)))
                        for b in raw.get("brokers", []))
        controller = raw.get("controller_id")
        return ClusterDescription(cluster_id=raw.get("cluster_id"),
                                  controller_id=int(controller) if controller is not None else None, brokers=brokers)

    def topic_metadata(self, topics: list[str] | None = None) -> list[TopicMetadata]:
        """Metadata of ``topics`` (all when None)."""
        from kafka.errors import for_code
        out = []
        for t in self._call("Metadata", self._client.describe_topics, topics):
            code = t.get("error_code", 0) or 0
            parts = tuple(PartitionMetadata(partition=int(p["partition_index"]), leader=int(p.get("leader_id", -1)),
                                            replicas=tuple(int(x) for x in p.get("replica_nodes", []) or []),
                                            isr=tuple(int(x) for x in p.get("isr_nodes", []) or []),
                                            offline=tuple(int(x) for x in p.get("offline_replicas", []) or []))
                          for p in t.get("partitions", []) or [])
            out.append(TopicMetadata(name=t["name"], partitions=parts, internal=bool(t.get("is_internal", False)),
                                     error=error_name(for_code(code)) if code else None))
        return out

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
        metas = self.topic_metadata(topics)
        alive = cluster.alive
        referenced: set[int] = set()
        partitions: dict[str, dict[int, PartitionMetadata]] = {}
        internal: dict[str, bool] = {}
        for t in metas:
            if t.error is not None:
                continue
            internal[t.name] = t.internal
            parts = partitions.setdefault(t.name, {})
            for p in t.partitions:
                parts[p.partition] = p
                referenced.update(p.replicas)
        topic_names = sorted(partitions)
        configs = self._topic_min_isr(topic_names)
        default_min_isr = self._broker_default_min_isr(next(iter(alive), None))
        replica_rows: list[ReplicaLogDir] = []
        broker_dirs: dict[int, dict[str, int]] = {}
        if include_log_dirs and alive:
            replica_rows, broker_dirs = self._log_dirs_detail(sorted(alive))
        sizes: dict[tuple[str, int, int], int] = {}
        dirs: dict[tuple[str, int], dict[int, str]] = {}
        for r in replica_rows:
            if r.is_future:
                continue
            sizes[(r.topic, r.partition, r.broker)] = r.size
            dirs.setdefault((r.topic, r.partition), {})[r.broker] = r.path
        brokers: dict[int, BrokerInfo] = {}
        for bid in sorted(set(alive) | referenced):
            info = alive.get(bid)
            caps = broker_dirs.get(bid, {})
            brokers[bid] = BrokerInfo(id=bid, rack=info.rack if info else None, alive=info is not None,
                                      log_dirs=tuple(sorted(caps)), capacity_bytes=dict(caps))
        topics_out: dict[str, TopicInfo] = {}
        for name in topic_names:
            parts_out: dict[int, PartitionInfo] = {}
            for idx, p in sorted(partitions[name].items()):
                replicas, leader = p.replicas, p.leader
                offline = p.offline or tuple(r for r in replicas if r not in alive)
                size = sizes.get((name, idx, leader))
                if size is None:
                    size = max((sizes.get((name, idx, r), 0) for r in replicas), default=0)
                parts_out[idx] = PartitionInfo(topic=name, partition=idx, replicas=replicas,
                                               isr=p.isr,
                                               leader=leader, offline=offline, size_bytes=int(size),
                                               replica_dirs=dirs.get((name, idx), {}))
            topics_out[name] = TopicInfo(name=name, partitions=parts_out, internal=internal.get(name, False),
                                         configs=configs.get(name, {}))
        return ClusterState(brokers=brokers, topics=topics_out, in_flight=in_flight,
                            cluster_id=cluster.cluster_id, controller_id=cluster.controller_id,
                            default_min_isr=default_min_isr)

    def _topic_min_isr(self, topics: list[str]) -> dict[str, dict[str, str]]:
        if not topics:
            return {}
        from kafka.admin import ConfigResource, ConfigResourceType
        res = [ConfigResource(ConfigResourceType.TOPIC, t, ["min.insync.replicas"]) for t in topics]
        raw = self._call("DescribeConfigs", self._client.describe_configs, res, config_filter="all")
        out: dict[str, dict[str, str]] = {}
        for name, entries in (raw.get("topic") or {}).items():
            v = (entries.get("min.insync.replicas") or {}).get("value")
            if v is not None:
                out[name] = {"min.insync.replicas": str(v)}
        return out

    def _broker_default_min_isr(self, broker_id: int | None) -> int:
        if broker_id is None:
            return 1
        from kafka.admin import ConfigResource, ConfigResourceType
        try:
            raw = self._call("DescribeConfigs", self._client.describe_configs,
                             [ConfigResource(ConfigResourceType.BROKER, str(broker_id), ["min.insync.replicas"])],
                             config_filter="all")
            v = ((raw.get("broker") or {}).get(str(broker_id)) or {}).get("min.insync.replicas", {}).get("value")
            return max(1, int(v)) if v is not None else 1
        except (KafkaAdminError, ValueError, TypeError):
            return 1

    def describe_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> dict[tuple[str, str], dict[str, str | None]]:
        """Dynamic config values (per-broker and per-topic overrides only, not defaults).

        :param broker_ids: brokers to read
        :param topics: topics to read
        :param keys: only these keys (each present in the result, None = not set); all when None
        :returns: {("broker", "1"): {key: value | None}, ("topic", "t"): {...}}
        """
        return self.describe_sourced(broker_ids, topics, keys).values

    def describe_sourced(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> ConfigsRead:
        """Per-resource dynamic values, and what each broker inherits where it has none.

        One DescribeConfigs without kafka-python's "modified" filter (which drops the
        cluster-wide default): each value is sorted by the source Kafka reports for it. A
        broker's own value (DYNAMIC_BROKER_CONFIG) goes to ``values``; one it inherits from the
        cluster default or its server.properties goes to ``inherited``.

        :returns: a ConfigsRead with nothing unreachable (a failure raises KafkaAdminError)
        """
        from kafka.admin import ConfigResource, ConfigResourceType, ConfigSourceType
        key_list = list(keys) if keys is not None else None
        res = [ConfigResource(ConfigResourceType.BROKER, str(b), key_list) for b in broker_ids]
        res += [ConfigResource(ConfigResourceType.TOPIC, t, key_list) for t in topics]
        out = ConfigsRead({}, {})
        for r in res:
            rtype = "broker" if r.resource_type == ConfigResourceType.BROKER else "topic"
            out.values[(rtype, r.name)] = {k: None for k in (key_list or [])}
        if not res:
            return out
        raw = self._call("DescribeConfigs", self._client.describe_configs, res, config_filter="all")
        for rtype in ("broker", "topic"):
            for name, entries in (raw.get(rtype) or {}).items():
                d = out.values.setdefault((rtype, name), {})
                for k, entry in entries.items():
                    if key_list is not None and k not in key_list:
                        continue
                    source = str(entry.get("config_source", ""))
                    value = entry.get("value")
                    if rtype == "broker" and source in INHERITED_SOURCES and value is not None:
                        out.inherited.setdefault((rtype, name), {})[k] = Inherited(str(value), source)
                    elif source in ConfigSourceType.__members__ and ConfigSourceType[source].is_modified():
                        d[k] = value  # what the "modified" filter kept: the resource's own value
        return out

    def read_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                     keys: Iterable[str] | None = None) -> ConfigsRead:
        """Like :meth:`describe_configs`, but a resource that cannot be read does not hide the others.

        One call for everything first; when it fails, topics are read together and each
        broker alone (a broker's configs can only be read from that broker), and whatever
        still fails is listed in ``unreachable`` with the error.
        """
        broker_ids, topics = list(broker_ids), list(topics)
        key_list = list(keys) if keys is not None else None
        try:
            return self.describe_sourced(broker_ids, topics, key_list)
        except KafkaAdminError as exc:
            log.warning("DescribeConfigs of %d broker(s) and %d topic(s) failed (%s): reading them one by one",
                        len(broker_ids), len(topics), exc)
        out = ConfigsRead({}, {})
        groups: list[tuple[list[int], list[str]]] = [([], topics)] if topics else []
        groups += [([b], []) for b in broker_ids]
        for i, (brokers, names) in enumerate(groups):
            try:
                part = self.describe_sourced(brokers, names, key_list)
                out.values.update(part.values)
                out.inherited.update(part.inherited)
            except KafkaAdminError as exc:
                failed = [("broker", str(b)) for b in brokers] + [("topic", t) for t in names]
                if names:
                    # Topic configs may be read from any broker: none answered, Kafka is unreachable.
                    failed += [("broker", str(b)) for g in groups[i + 1:] for b in g[0]]
                for res in failed:
                    out.unreachable[res] = str(exc)
                if names:
                    break
        return out

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, InFlight]:
        """Ongoing reassignments (all, or of ``partitions``)."""
        arg = None
        if partitions is not None:
            from kafka.structs import TopicPartition as KTP
            arg = [KTP(t, p) for t, p in partitions]
            if not arg:
                return {}
        raw = self._call("ListPartitionReassignments", self._client.list_partition_reassignments, arg)
        return {(tp.topic, tp.partition): InFlight(tuple(v["replicas"]), tuple(v["adding_replicas"]),
                                                   tuple(v["removing_replicas"]))
                for tp, v in raw.items()}

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
        rows, _ = self._log_dirs_detail(broker_ids, partitions)
        return rows

    def _log_dirs_detail(self, broker_ids: Iterable[int] | None = None,
                         partitions: Iterable[TopicPartition] | Mapping[int, Iterable[TopicPartition]] | None = None
                         ) -> tuple[list[ReplicaLogDir], dict[int, dict[str, int]]]:
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
                return [], {}
            args = {b: shared for b in broker_ids}
        rows: list[ReplicaLogDir] = []
        dirs: dict[int, dict[str, int]] = {}
        answers = self._log_dirs_at_once(args)
        for b, tp_arg in args.items():
            resp = answers.get(b)
            if resp is None:  # not answered in the concurrent round: alone, with retries
                try:
                    resp = self._call("DescribeLogDirs", self._client.describe_log_dirs, tp_arg, [b], attempts=2)
                except KafkaAdminError as exc:
                    log.warning("DescribeLogDirs on broker %s failed: %s", b, exc)
                    continue
            for entry in resp:
                bid = int(entry["broker"])
                for d in entry["log_dirs"]:
                    if d.get("error_code", 0):
                        continue
                    dirs.setdefault(bid, {})[d["log_dir"]] = int(d.get("total_bytes", -1) or -1)
                    for t in d.get("topics", []):
                        for p in t.get("partitions", []):
                            rows.append(ReplicaLogDir(broker=bid, path=d["log_dir"], topic=t["name"],
                                                      partition=int(p["partition_index"]),
                                                      size=int(p["partition_size"]),
                                                      offset_lag=int(p["offset_lag"]),
                                                      is_future=bool(p["is_future_key"])))
        return rows, dirs

    def _log_dirs_at_once(self, args: Mapping[int, dict[str, list[int]] | None]
                          ) -> dict[int, list[dict[str, Any]]]:
        """One DescribeLogDirs to every broker, all in flight together (one round trip per poll,
        not one per broker: a 300-broker cluster would otherwise spend seconds of each poll
        waiting). Brokers that fail are left out; the caller asks them again one by one.
        """
        if len(args) < 2:
            return {}
        from kafka.protocol.admin import DescribeLogDirsRequest
        client = self._client
        manager = client._manager
        requests = {b: DescribeLogDirsRequest(topics=client._get_topic_partitions(a)) for b, a in args.items()}

        async def ask_all() -> dict[int, list[dict[str, Any]]]:
            sent = {b: manager.send(req, node_id=b) for b, req in requests.items()}
            out: dict[int, list[dict[str, Any]]] = {}
            for b, future in sent.items():
                try:
                    resp = await future
                except Exception as exc:  # noqa: BLE001 - retried alone by the caller
                    log.debug("DescribeLogDirs on broker %s (concurrent round): %s", b, exc)
                    continue
                out[b] = [{"broker": b, "log_dirs": [r.to_dict() for r in resp.results]}]
            return out

        try:
            return manager.run(ask_all)
        except Exception as exc:  # noqa: BLE001 - fall back to asking one broker at a time
            log.debug("concurrent DescribeLogDirs failed: %s", exc)
            return {}

    def list_offsets(self, partitions: Iterable[TopicPartition], latest: bool = True) -> dict[TopicPartition, int]:
        """Log-end (or log-start) offsets from the partitions' leaders (ListOffsets).

        A partition whose leader answers with an error (offline, leader moving) is left out:
        callers sample twice and compare, so a missing partition is "not measured", never 0.

        :param partitions: (topic, partition) pairs
        :param latest: log-end offsets; False for log-start offsets
        """
        from kafka.admin import OffsetSpec
        from kafka.structs import TopicPartition as KTP
        spec = OffsetSpec.LATEST if latest else OffsetSpec.EARLIEST
        keys = list(partitions)
        if not keys:
            return {}
        try:
            raw = self._call("ListOffsets", self._client.list_partition_offsets, {KTP(t, p): spec for t, p in keys})
        except KafkaAdminError as exc:
            if len(keys) == 1:
                log.warning("ListOffsets for %s-%s: %s", keys[0][0], keys[0][1], exc)
                return {}
            out: dict[TopicPartition, int] = {}
            for key in keys:  # one bad partition fails the whole call in kafka-python: ask one by one
                out.update(self.list_offsets([key], latest))
            return out
        return {(tp.topic, tp.partition): int(v.offset) for tp, v in raw.items()}

    # -- writes ----------------------------------------------------------------------
    def alter_configs(self, changes: Iterable[ConfigChangeLike], validate_only: bool = False) -> None:
        """Apply ConfigChanges with IncrementalAlterConfigs (SET, or DELETE when value is None).

        :param changes: :class:`~kafka_reassign.throttle.ConfigChange` objects
        :raises KafkaAdminError: naming every resource that failed
        """
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
        grouped: dict[tuple[str, str], dict[str, tuple[object, str | None]]] = {}
        for c in changes:
            op = AlterConfigOp.DELETE if c.value is None else AlterConfigOp.SET
            grouped.setdefault((c.resource_type, c.name), {})[c.key] = (op, c.value)
        if not grouped:
            return
        res = [ConfigResource(ConfigResourceType.BROKER if rtype == "broker" else ConfigResourceType.TOPIC,
                              name, cfg) for (rtype, name), cfg in grouped.items()]
        raw = self._call("IncrementalAlterConfigs", self._client.alter_configs, res, validate_only=validate_only,
                         raise_on_unknown=False, incremental=True)
        failed = [f"{rtype} {name}: {result}" for rtype, by_name in (raw or {}).items()
                  for name, result in by_name.items() if result != "OK"]
        if failed:
            first = failed[0]
            name = first.split("] ", 1)[1].split(":", 1)[0] if "] " in first else "ALTER_CONFIGS_FAILED"
            raise KafkaAdminError("IncrementalAlterConfigs", name, "; ".join(failed))

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
            raw = self._call("AlterPartitionReassignments", self._client.alter_partition_reassignments, arg)
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

    def alter_replica_log_dirs(self, moves: Mapping[tuple[str, int, int], str]
                               ) -> dict[tuple[str, int, int], str | None]:
        """Move replicas between log dirs of their broker (KIP-113).

        :param moves: {(topic, partition, broker): absolute log dir}
        :returns: {(topic, partition, broker): None on success, else the Kafka error name}
        """
        if not moves:
            return {}
        raw = self._call("AlterReplicaLogDirs", self._client.alter_replica_log_dirs, dict(moves))
        out: dict[tuple[str, int, int], str | None] = {}
        for tpr, err in raw.items():
            name = error_name(err)
            out[(tpr.topic, tpr.partition, tpr.broker_id)] = None if getattr(err, "errno", None) == 0 or name in ("NoError", "NONE", "NO_ERROR") else name
        for key in moves:
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
        resp = self._call("ElectLeaders", self._client.elect_leaders, 0, by_topic, raise_errors=False)
        out: dict[TopicPartition, str | None] = {}
        for res in getattr(resp, "replica_election_results", []):
            for pr in res.partition_result:
                name = error_name(for_code(pr.error_code)) if pr.error_code else None
                out[(res.topic, pr.partition_id)] = None if name in (None, "ELECTION_NOT_NEEDED") else name
        return out
