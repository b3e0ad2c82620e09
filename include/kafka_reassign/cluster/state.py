"""Plain data describing a Kafka cluster, shared by validation, steps, progress and admin.

Nothing here talks to Kafka: :class:`ClusterState` is built either by
:meth:`kafka_reassign.cluster.admin.KafkaAdmin.cluster_state` (live) or by
:meth:`ClusterState.from_snapshot` (offline, tests, the planner's input).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple

TopicPartition = tuple[str, int]

#: Kafka topics that exist on every cluster and that a plan should only touch on purpose.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state",
                             "__cluster_metadata"})


class DirSpace(NamedTuple):
    """A log dir's volume as its broker reports it (KIP-827, DescribeLogDirs v4+); -1 = not reported.

    :param total: the volume's size in bytes
    :param usable: the bytes still free on it
    """

    total: int
    usable: int


@dataclass(frozen=True)
class BrokerInfo:
    """A broker as the reassignment logic needs it.

    :param id: broker id
    :param rack: broker.rack or None
    :param alive: registered and reachable (in the metadata's broker list)
    :param log_dirs: absolute log directory paths; empty when unknown (dead broker)
    :param capacity_bytes: total bytes per log dir when known
    :param usable_bytes: free bytes per log dir as the broker last reported them (KIP-827)
    :param cordoned_dirs: log dirs cordoned (KIP-1066, Kafka 4.3+): they receive no new replica
    """

    id: int
    rack: str | None = None
    alive: bool = True
    log_dirs: tuple[str, ...] = ()
    capacity_bytes: dict[str, int] = field(default_factory=dict, compare=False)
    usable_bytes: dict[str, int] = field(default_factory=dict, compare=False)
    cordoned_dirs: frozenset[str] = field(default_factory=frozenset, compare=False)

    @property
    def cordoned(self) -> bool:
        """Every log dir cordoned: Kafka places no new replica on this broker."""
        # No cordoned dir (almost every broker) answers without a set: validation asks once per target replica.
        return bool(self.cordoned_dirs) and bool(self.log_dirs) and set(self.log_dirs) <= self.cordoned_dirs


@dataclass(frozen=True)
class PartitionInfo:
    """One partition's replica placement and health.

    :param replicas: assigned replicas, preferred leader first
    :param isr: in-sync replicas
    :param leader: current leader, -1 when none
    :param offline: replicas on offline brokers / dirs
    :param size_bytes: the leader's local log size (0 when unknown): the bytes a new replica copies
    :param remote_bytes: bytes only in remote storage (tiered topic, KIP-405): a move leaves them there
    :param bytes_in_per_sec: produce rate (0 when unknown)
    :param replica_dirs: log dir of each replica when known
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    leader: int = -1
    offline: tuple[int, ...] = ()
    size_bytes: int = 0
    bytes_in_per_sec: float = 0.0
    replica_dirs: dict[int, str] = field(default_factory=dict, compare=False)
    remote_bytes: int = 0

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class TopicInfo:
    """A topic: its partitions, whether Kafka marks it internal, and its configs.

    :param configs: effective configs we care about (at least min.insync.replicas when known)
    """

    name: str
    partitions: dict[int, PartitionInfo]
    internal: bool = False
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InFlight:
    """A reassignment in progress (ListPartitionReassignments, KIP-455).

    :param replicas: the full replica set during the move (target + leaving ones)
    :param adding: replicas being added
    :param removing: replicas being removed
    """

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def target(self) -> tuple[int, ...]:
        """Where the partition is going: the full set minus the leaving replicas."""
        return tuple(b for b in self.replicas if b not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        """Where the partition was before this move: the full set minus the arriving replicas."""
        return tuple(b for b in self.replicas if b not in self.adding)

    def to_json(self) -> dict[str, list[int]]:
        return {"replicas": list(self.replicas), "adding": list(self.adding),
                "removing": list(self.removing)}


class ReplicaLogDir(NamedTuple):
    """One row of DescribeLogDirs (KIP-113): a replica (or future replica) in a log dir.

    A named tuple, not a frozen dataclass: a poll builds one per replica in flight, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) took four times as long.
    """

    broker: int
    path: str
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class ClusterState:
    """Everything validation and batching need to know about a cluster at one moment.

    :param brokers: every known broker (alive or not) by id
    :param topics: topics by name
    :param in_flight: ongoing reassignments by (topic, partition)
    :param default_min_isr: min.insync.replicas for topics that do not say
    """

    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]
    in_flight: dict[TopicPartition, InFlight] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int | None = None
    default_min_isr: int = 1

    # -- lookups ---------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        """The partition or None when the topic or partition does not exist."""
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def min_isr(self, topic: str) -> int:
        """Effective min.insync.replicas of ``topic`` (falls back to the cluster default)."""
        t = self.topics.get(topic)
        raw = t.configs.get("min.insync.replicas") if t is not None else None
        try:
            return max(1, int(raw)) if raw is not None else self.default_min_isr
        except (TypeError, ValueError):
            return self.default_min_isr

    def is_internal(self, topic: str) -> bool:
        t = self.topics.get(topic)
        return topic in INTERNAL_TOPICS or (t is not None and t.internal)

    @property
    def alive_brokers(self) -> set[int]:
        return {b.id for b in self.brokers.values() if b.alive}

    def partitions(self) -> Iterable[PartitionInfo]:
        for t in self.topics.values():
            yield from t.partitions.values()

    def size_of(self, topic: str, partition: int) -> int:
        p = self.partition(topic, partition)
        return p.size_bytes if p is not None else 0

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> "ClusterState":
        """Build a state from a snapshot (docs/FORMATS.md, version 1).

        Brokers are alive unless the snapshot marks ``"alive": false``; ISR defaults to the
        replicas and the leader to the first replica, as a healthy cluster would have them.
        Optional ``in_flight`` (list of {topic, partition, replicas, adding, removing}) is read.

        :param snapshot: a snapshot dict (see :mod:`kafka_reassign.cluster.snapshot`)
        """
        brokers: dict[int, BrokerInfo] = {}
        for b in snapshot.get("brokers", []):
            dirs = tuple(d["path"] if isinstance(d, dict) else str(d) for d in b.get("log_dirs", []))
            caps = {d["path"]: int(d.get("capacity_bytes", 0)) for d in b.get("log_dirs", [])
                    if isinstance(d, dict)}
            cordoned = frozenset(d["path"] for d in b.get("log_dirs", []) if isinstance(d, dict) and d.get("cordoned"))
            brokers[int(b["id"])] = BrokerInfo(id=int(b["id"]), rack=b.get("rack"),
                                               alive=bool(b.get("alive", True)), log_dirs=dirs,
                                               capacity_bytes=caps, cordoned_dirs=cordoned)
        topics: dict[str, TopicInfo] = {}
        for t in snapshot.get("topics", []):
            parts: dict[int, PartitionInfo] = {}
            for p in t.get("partitions", []):
                replicas = tuple(int(r) for r in p["replicas"])
                dirs_list = p.get("log_dirs") or []
                replica_dirs = {r: d for r, d in zip(replicas, dirs_list) if d and d != "any"}
                offline = tuple(int(r) for r in p.get("offline", [])) or tuple(
                    r for r in replicas if r in brokers and not brokers[r].alive)
                isr = tuple(int(r) for r in p["isr"]) if "isr" in p else tuple(
                    r for r in replicas if r not in offline)
                leader = int(p["leader"]) if p.get("leader") is not None else (isr[0] if isr else -1)
                parts[int(p["partition"])] = PartitionInfo(
                    topic=t["name"], partition=int(p["partition"]), replicas=replicas, isr=isr,
                    leader=leader, offline=offline, size_bytes=int(p.get("size_bytes", 0) or 0),
                    bytes_in_per_sec=float(p.get("bytes_in_per_sec", 0) or 0),
                    replica_dirs=replica_dirs, remote_bytes=int(p.get("remote_bytes", 0) or 0))
            topics[t["name"]] = TopicInfo(name=t["name"], partitions=parts,
                                          internal=bool(t.get("internal", False)),
                                          configs={k: str(v) for k, v in (t.get("configs") or {}).items()})
        in_flight = {
            (f["topic"], int(f["partition"])): InFlight(tuple(f["replicas"]), tuple(f.get("adding", ())),
                                                        tuple(f.get("removing", ())))
            for f in snapshot.get("in_flight", [])
        }
        return cls(brokers=brokers, topics=topics, in_flight=in_flight,
                   cluster_id=snapshot.get("cluster_id"),
                   controller_id=snapshot.get("controller_id"),
                   default_min_isr=int(snapshot.get("default_min_isr", 1)))


def with_produce_rates(state: ClusterState, rates: "dict[TopicPartition, float] | None") -> ClusterState:
    """A copy of ``state`` whose partitions carry ``bytes_in_per_sec`` from ``rates``.

    The admin API does not expose produce rates; a snapshot taken with sampling (or metrics
    from elsewhere) provides them for the KIP-73 throttle-vs-produce-rate warnings.

    :param rates: (topic, partition) -> bytes/s
    """
    if not rates:
        return state
    from dataclasses import replace
    topics = {}
    for name, t in state.topics.items():
        parts = {i: (_with_rate(p, float(rates[(name, i)])) if (name, i) in rates else p)
                 for i, p in t.partitions.items()}
        topics[name] = replace(t, partitions=parts)
    return replace(state, topics=topics)


def _with_rate(p: PartitionInfo, rate: float) -> PartitionInfo:
    """``dataclasses.replace(p, bytes_in_per_sec=rate)``: the same fields, copied without ``replace``'s
    generic walk and the frozen ``__init__`` (seven times as long, once per partition of the cluster).

    :param p: the partition
    :param rate: its produce rate (bytes/s)
    """
    out = object.__new__(type(p))
    out.__dict__.update(p.__dict__)
    out.__dict__["bytes_in_per_sec"] = rate
    return out


def rates_from_snapshot(snapshot: dict[str, Any]) -> dict[TopicPartition, float]:
    """(topic, partition) -> bytes_in_per_sec of a snapshot (only the non-zero ones)."""
    out: dict[TopicPartition, float] = {}
    for t in snapshot.get("topics", []):
        for p in t.get("partitions", []):
            r = float(p.get("bytes_in_per_sec", 0) or 0)
            if r > 0:
                out[(t["name"], int(p["partition"]))] = r
    return out
