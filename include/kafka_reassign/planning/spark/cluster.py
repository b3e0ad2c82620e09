"""The planner's view of a cluster: a validated snapshot plus a mutable working assignment.

:class:`Cluster` is read-only and built once from a snapshot (docs/FORMATS.md, version 1) after a
strict validation that reports every problem with its location (``topics[2].partitions[5]
(orders-5).replicas[1]: broker 42 is not in brokers``). :class:`Assignment` is the state the
goals edit move by move; it keeps per-broker, per-log-dir and per-(topic, broker) counters up
to date incrementally, so checking a candidate move costs O(replication factor), not a scan.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from kafka_reassign.planning.plan import ANY_LOG_DIR as ANY
from kafka_reassign.planning.plan import TopicPartitionName
from kafka_reassign.cluster.snapshot import validate_snapshot
from kafka_reassign.units import DEFAULT_NETWORK_BYTES_PER_SEC


@dataclass(frozen=True)
class LogDir:
    """One log directory (JBOD disk) of a broker; a cordoned one (KIP-1066) receives no new replica."""

    path: str
    capacity_bytes: float
    cordoned: bool = False


@dataclass(frozen=True)
class Broker:
    """A broker: id, rack (None = no rack), its log dirs and NIC speed."""

    id: int
    rack: str | None
    log_dirs: tuple[LogDir, ...]
    network_bytes_per_sec: float = DEFAULT_NETWORK_BYTES_PER_SEC
    alive: bool = True

    @property
    def capacity_bytes(self) -> float:
        return sum(d.capacity_bytes for d in self.log_dirs)

    @property
    def cordoned(self) -> bool:
        """Every log dir cordoned: like Kafka's own placer, the planner puts no new replica here."""
        return bool(self.log_dirs) and all(d.cordoned for d in self.log_dirs)

    @property
    def rack_key(self) -> str:
        """Rack used by the placement rules; a broker without a rack is its own failure domain."""
        return self.rack if self.rack is not None else f"__no_rack_{self.id}"


@dataclass(frozen=True)
class Partition(TopicPartitionName):
    """One partition of the snapshot.

    :param replicas: current replicas, preferred leader first
    :param log_dirs: the log dir of each replica (resolved; unknown -> the broker's first dir)
    :param dirs_known: whether the snapshot named the log dirs
    :param size_bytes: the local log: what a new replica copies and what fills a disk
    :param remote_bytes: bytes in remote storage (tiered topic, KIP-405): not copied by a move
    """

    index: int
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    size_bytes: float
    bytes_in_per_sec: float
    log_dirs: tuple[str, ...]
    dirs_known: bool
    min_isr: int
    remote_bytes: float = 0.0


@dataclass
class Cluster:
    """A validated, read-only snapshot."""

    brokers: dict[int, Broker]
    partitions: list[Partition]
    topic_configs: dict[str, dict[str, str]]
    index: dict[tuple[str, int], int] = field(default_factory=dict)
    topic_partitions: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.index:
            self.index = {p.key: p.index for p in self.partitions}
        if not self.topic_partitions:
            tp: dict[str, list[int]] = {t: [] for t in self.topic_configs}
            for p in self.partitions:
                tp.setdefault(p.topic, []).append(p.index)
            self.topic_partitions = tp

    @property
    def racks(self) -> set[str]:
        return {b.rack_key for b in self.brokers.values()}

    def rack_of(self, broker: int) -> str:
        return self.brokers[broker].rack_key

    @property
    def has_racks(self) -> bool:
        return any(b.rack is not None for b in self.brokers.values())

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_snapshot(cls, snapshot: Any) -> "Cluster":
        """Validate a snapshot and build the cluster view.

        Validation is :func:`kafka_reassign.cluster.snapshot.validate_snapshot` with ``planning=True``
        (the snapshot format plus what planning needs: log dir capacities, racks on all
        brokers or none, leaders among replicas, known log dirs); what follows only builds.

        :param snapshot: the decoded snapshot JSON
        :raises SnapshotError: listing every problem, each naming its location
        """
        validate_snapshot(snapshot, planning=True)
        brokers: dict[int, Broker] = {}
        for b in snapshot["brokers"]:
            dirs = tuple(LogDir(d["path"], float(d["capacity_bytes"]), d.get("cordoned") is True)
                         for d in b["log_dirs"])
            brokers[b["id"]] = Broker(b["id"], b.get("rack"), dirs,
                                      float(b.get("network_bytes_per_sec", DEFAULT_NETWORK_BYTES_PER_SEC)),
                                      b.get("alive", True) is not False)
        partitions: list[Partition] = []
        configs: dict[str, dict[str, str]] = {}
        for t in snapshot["topics"]:
            name = t["name"]
            cfg = configs[name] = {str(k): str(v) for k, v in (t.get("configs") or {}).items()}
            min_isr = max(1, int(cfg.get("min.insync.replicas", "1")))
            for p in t["partitions"]:
                reps = p["replicas"]
                leader = p.get("leader", reps[0])
                raw_ld = p.get("log_dirs")
                dirs_known = raw_ld is not None
                resolved: list[str] = []
                for ri, r in enumerate(reps):
                    paths = [d.path for d in brokers[r].log_dirs]
                    d = raw_ld[ri] if raw_ld is not None else ANY
                    if d == ANY or d is None:
                        dirs_known = dirs_known and len(paths) == 1
                        d = paths[0]
                    resolved.append(d)
                partitions.append(Partition(
                    index=len(partitions), topic=name, partition=p["partition"], replicas=tuple(reps),
                    leader=-1 if leader is None else leader, size_bytes=float(p.get("size_bytes", 0)),
                    bytes_in_per_sec=float(p.get("bytes_in_per_sec", 0) or 0),
                    log_dirs=tuple(resolved), dirs_known=dirs_known, min_isr=min_isr,
                    remote_bytes=float(p.get("remote_bytes", 0) or 0)))
        return cls(brokers=brokers, partitions=partitions, topic_configs=configs)


class Assignment:
    """A mutable replica placement with incrementally maintained load counters.

    :param cluster: the snapshot being planned
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.replicas: list[list[int]] = [list(p.replicas) for p in cluster.partitions]
        self.dirs: list[list[str]] = [list(p.log_dirs) for p in cluster.partitions]
        self.sizes: list[float] = [p.size_bytes for p in cluster.partitions]
        self.broker_bytes: dict[int, float] = {b: 0.0 for b in cluster.brokers}
        self.broker_count: dict[int, int] = {b: 0 for b in cluster.brokers}
        self.broker_leaders: dict[int, int] = {b: 0 for b in cluster.brokers}
        self.dir_bytes: dict[tuple[int, str], float] = {
            (b.id, d.path): 0.0 for b in cluster.brokers.values() for d in b.log_dirs}
        self.topic_broker: Counter[tuple[str, int]] = Counter()
        self.touched: set[int] = set()

    def load_counters(self, broker_bytes: dict[int, float], broker_count: dict[int, int],
                      broker_leaders: dict[int, int], dir_bytes: dict[tuple[int, str], float],
                      topic_broker: dict[tuple[str, int], int]) -> None:
        """Initialise counters from aggregates computed elsewhere (see driver_plan).

        :param broker_bytes: bytes per broker
        :param topic_broker: replica count per (topic, broker)
        """
        for b in self.broker_bytes:
            self.broker_bytes[b] = float(broker_bytes.get(b, 0.0))
            self.broker_count[b] = int(broker_count.get(b, 0))
            self.broker_leaders[b] = int(broker_leaders.get(b, 0))
        for k in self.dir_bytes:
            self.dir_bytes[k] = float(dir_bytes.get(k, 0.0))
        self.topic_broker = Counter({k: int(v) for k, v in topic_broker.items() if v})

    def compute_counters(self) -> None:
        """Initialise counters by a scan in Python (used when no Spark aggregates are given)."""
        for b in self.broker_bytes:
            self.broker_bytes[b] = 0.0
            self.broker_count[b] = 0
            self.broker_leaders[b] = 0
        for k in self.dir_bytes:
            self.dir_bytes[k] = 0.0
        self.topic_broker = Counter()
        for p, reps, dirs in zip(self.cluster.partitions, self.replicas, self.dirs):
            for r, d in zip(reps, dirs):
                self.broker_bytes[r] += p.size_bytes
                self.broker_count[r] += 1
                self.dir_bytes[(r, d)] += p.size_bytes
                self.topic_broker[(p.topic, r)] += 1
            self.broker_leaders[reps[0]] += 1

    # -- queries -----------------------------------------------------------------------
    def util(self, broker: int) -> float:
        return self.broker_bytes[broker] / self.cluster.brokers[broker].capacity_bytes

    def racks(self, pi: int, without: int | None = None) -> list[str]:
        rack_of = self.cluster.rack_of
        return [rack_of(r) for r in self.replicas[pi] if r != without]

    def best_dir(self, broker: int, size: float, ceiling: float) -> str | None:
        """The log dir of ``broker`` with most free room under ``ceiling`` that fits ``size``."""
        best, best_room = None, -1.0
        for d in self.cluster.brokers[broker].log_dirs:
            if d.cordoned:
                continue
            room = d.capacity_bytes * ceiling - self.dir_bytes[(broker, d.path)]
            if room >= size and room > best_room:
                best, best_room = d.path, room
        return best

    # -- edits -------------------------------------------------------------------------
    def move(self, pi: int, old: int, new: int, new_dir: str) -> None:
        """Replace replica ``old`` of partition ``pi`` by ``new`` (same position)."""
        reps = self.replicas[pi]
        pos = reps.index(old)
        size = self.sizes[pi]
        topic = self.cluster.partitions[pi].topic
        old_dir = self.dirs[pi][pos]
        reps[pos] = new
        self.dirs[pi][pos] = new_dir
        self.broker_bytes[old] -= size
        self.broker_bytes[new] += size
        self.broker_count[old] -= 1
        self.broker_count[new] += 1
        self.dir_bytes[(old, old_dir)] -= size
        self.dir_bytes[(new, new_dir)] += size
        self.topic_broker[(topic, old)] -= 1
        self.topic_broker[(topic, new)] += 1
        if pos == 0:
            self.broker_leaders[old] -= 1
            self.broker_leaders[new] += 1
        self.touched.add(pi)

    def add(self, pi: int, broker: int, log_dir: str) -> None:
        """Add a replica of ``pi`` on ``broker`` (last position: leadership unchanged)."""
        size = self.sizes[pi]
        self.replicas[pi].append(broker)
        self.dirs[pi].append(log_dir)
        self.broker_bytes[broker] += size
        self.broker_count[broker] += 1
        self.dir_bytes[(broker, log_dir)] += size
        self.topic_broker[(self.cluster.partitions[pi].topic, broker)] += 1
        self.touched.add(pi)

    def remove(self, pi: int, broker: int) -> None:
        """Drop the replica of ``pi`` on ``broker``."""
        reps = self.replicas[pi]
        pos = reps.index(broker)
        size = self.sizes[pi]
        d = self.dirs[pi][pos]
        if pos == 0 and len(reps) > 1:
            self.broker_leaders[broker] -= 1
            self.broker_leaders[reps[1]] += 1
        del reps[pos]
        del self.dirs[pi][pos]
        self.broker_bytes[broker] -= size
        self.broker_count[broker] -= 1
        self.dir_bytes[(broker, d)] -= size
        self.topic_broker[(self.cluster.partitions[pi].topic, broker)] -= 1
        self.touched.add(pi)

    def make_leader(self, pi: int, broker: int) -> None:
        """Put ``broker`` first (preferred leader) without moving data."""
        reps = self.replicas[pi]
        pos = reps.index(broker)
        if pos == 0:
            return
        self.broker_leaders[reps[0]] -= 1
        self.broker_leaders[broker] += 1
        reps[0], reps[pos] = reps[pos], reps[0]
        dirs = self.dirs[pi]
        dirs[0], dirs[pos] = dirs[pos], dirs[0]
        self.touched.add(pi)

    def set_dir(self, pi: int, broker: int, new_dir: str) -> None:
        """Move the replica of ``pi`` on ``broker`` to another log dir of the same broker (KIP-113)."""
        pos = self.replicas[pi].index(broker)
        old_dir = self.dirs[pi][pos]
        size = self.sizes[pi]
        self.dir_bytes[(broker, old_dir)] -= size
        self.dir_bytes[(broker, new_dir)] += size
        self.dirs[pi][pos] = new_dir
        self.touched.add(pi)

    def final(self) -> list[tuple[tuple[int, ...], tuple[str, ...]]]:
        return [(tuple(r), tuple(d)) for r, d in zip(self.replicas, self.dirs)]


def distinct_racks(cluster: Cluster, brokers: Iterable[int]) -> int:
    return len({cluster.rack_of(b) for b in brokers})


def rack_target(cluster: Cluster, rf: int) -> int:
    """How many distinct racks a partition of ``rf`` replicas should span: as many as racks allow."""
    return min(rf, len(cluster.racks))
