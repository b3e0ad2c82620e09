"""The planner's view of a cluster: a validated snapshot plus a mutable working assignment.

:class:`Cluster` is read-only and built once from a snapshot (DESIGN.md, version 1) after a
strict validation that reports every problem with its location (``topics[2].partitions[5]
(orders-5).replicas[1]: broker 42 is not in brokers``). :class:`Assignment` is the state the
goals edit move by move; it keeps per-broker, per-log-dir and per-(topic, broker) counters up
to date incrementally, so checking a candidate move costs O(replication factor), not a scan.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from kafka_reassign.errors import Problem, SnapshotError

ANY = "any"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class LogDir:
    """One log directory (JBOD disk) of a broker."""

    path: str
    capacity_bytes: float


@dataclass(frozen=True)
class Broker:
    """A broker: id, rack (None = no rack), its log dirs and NIC speed."""

    id: int
    rack: str | None
    log_dirs: tuple[LogDir, ...]
    network_bytes_per_sec: float = 125_000_000.0
    alive: bool = True

    @property
    def capacity_bytes(self) -> float:
        return sum(d.capacity_bytes for d in self.log_dirs)

    @property
    def rack_key(self) -> str:
        """Rack used by the placement rules; a broker without a rack is its own failure domain."""
        return self.rack if self.rack is not None else f"__no_rack_{self.id}"


@dataclass(frozen=True)
class Partition:
    """One partition of the snapshot.

    :param replicas: current replicas, preferred leader first
    :param log_dirs: the log dir of each replica (resolved; unknown -> the broker's first dir)
    :param dirs_known: whether the snapshot named the log dirs
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

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


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

        :param snapshot: the decoded snapshot JSON
        :raises SnapshotError: listing every problem, each naming its location
        """
        problems: list[Problem] = []

        def bad(entry: str, reason: str, kind: str = "invalid") -> None:
            problems.append(Problem(entry, reason, kind))

        if not isinstance(snapshot, dict):
            raise SnapshotError(Problem("snapshot", f"must be a JSON object, got {type(snapshot).__name__}",
                                        "not_object"))
        if snapshot.get("version") != 1 or not _is_int(snapshot.get("version")):
            bad("version", f"must be 1, got {snapshot.get('version')!r}", "bad_version")
        raw_brokers = snapshot.get("brokers")
        brokers: dict[int, Broker] = {}
        if not isinstance(raw_brokers, list) or not raw_brokers:
            bad("brokers", "missing or empty: a snapshot needs at least one broker", "no_brokers")
            raw_brokers = []
        for i, b in enumerate(raw_brokers):
            where = f"brokers[{i}]"
            if not isinstance(b, dict):
                bad(where, f"must be an object, got {type(b).__name__}")
                continue
            bid = b.get("id")
            if not _is_int(bid) or bid < 0:
                bad(f"{where}.id", f"must be a non-negative integer, got {bid!r}", "bad_broker_id")
                continue
            where = f"brokers[{i}] (broker {bid})"
            if bid in brokers:
                bad(where, f"broker id {bid} appears twice", "duplicate_broker")
                continue
            rack = b.get("rack")
            if rack is not None and (not isinstance(rack, str) or not rack):
                bad(f"{where}.rack", f"must be a non-empty string or null, got {rack!r}", "bad_rack")
                rack = None
            dirs: list[LogDir] = []
            raw_dirs = b.get("log_dirs")
            if not isinstance(raw_dirs, list) or not raw_dirs:
                bad(f"{where}.log_dirs", "missing or empty: each broker needs at least one log dir "
                                         "with capacity_bytes", "no_log_dirs")
                raw_dirs = []
            seen_paths: set[str] = set()
            for j, d in enumerate(raw_dirs):
                dwhere = f"{where}.log_dirs[{j}]"
                if not isinstance(d, dict) or not isinstance(d.get("path"), str) or not d.get("path"):
                    bad(dwhere, "must be an object with a non-empty 'path'", "bad_log_dir")
                    continue
                cap = d.get("capacity_bytes")
                if not _is_num(cap) or cap <= 0:
                    bad(f"{dwhere}.capacity_bytes", f"must be a positive number, got {cap!r}",
                        "bad_capacity")
                    continue
                if d["path"] in seen_paths:
                    bad(dwhere, f"log dir {d['path']} appears twice", "duplicate_log_dir")
                    continue
                seen_paths.add(d["path"])
                dirs.append(LogDir(d["path"], float(cap)))
            net = b.get("network_bytes_per_sec", 125_000_000)
            if not _is_num(net) or net <= 0:
                bad(f"{where}.network_bytes_per_sec", f"must be a positive number, got {net!r}")
                net = 125_000_000
            alive = b.get("alive", True) is not False
            if dirs:
                brokers[bid] = Broker(bid, rack, tuple(dirs), float(net), alive)
            elif bid not in brokers:
                # keep the id known so partitions on it are not also reported as unknown
                brokers[bid] = Broker(bid, rack, (LogDir("/unknown", 1.0),), float(net))
        racked = sum(1 for b in brokers.values() if b.rack is not None)
        if 0 < racked < len(brokers):
            bad("brokers", f"{racked} of {len(brokers)} brokers have a rack: either all brokers "
                           "have broker.rack or none (as Kafka requires for rack-aware placement)",
                "mixed_racks")

        raw_topics = snapshot.get("topics")
        if not isinstance(raw_topics, list):
            bad("topics", "missing or not a list", "bad_topics")
            raw_topics = []
        partitions: list[Partition] = []
        configs: dict[str, dict[str, str]] = {}
        for ti, t in enumerate(raw_topics):
            twhere = f"topics[{ti}]"
            if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t.get("name"):
                bad(twhere, "must be an object with a non-empty 'name'", "bad_topic")
                continue
            name = t["name"]
            twhere = f"topics[{ti}] ({name})"
            if name in configs:
                bad(twhere, f"topic {name} appears twice", "duplicate_topic")
                continue
            raw_cfg = t.get("configs") or {}
            if not isinstance(raw_cfg, dict):
                bad(f"{twhere}.configs", "must be an object of strings")
                raw_cfg = {}
            cfg = {str(k): str(v) for k, v in raw_cfg.items()}
            configs[name] = cfg
            try:
                min_isr = max(1, int(cfg.get("min.insync.replicas", "1")))
            except ValueError:
                bad(f"{twhere}.configs.min.insync.replicas", f"must be an integer, got "
                                                              f"{cfg['min.insync.replicas']!r}")
                min_isr = 1
            raw_parts = t.get("partitions")
            if not isinstance(raw_parts, list):
                bad(f"{twhere}.partitions", "missing or not a list", "bad_partitions")
                continue
            seen: set[int] = set()
            for pi, p in enumerate(raw_parts):
                pwhere = f"{twhere}.partitions[{pi}]"
                if not isinstance(p, dict):
                    bad(pwhere, "must be an object")
                    continue
                pid = p.get("partition")
                if not _is_int(pid) or pid < 0:
                    bad(f"{pwhere}.partition", f"must be a non-negative integer, got {pid!r}",
                        "bad_partition_id")
                    continue
                pwhere = f"topics[{ti}].partitions[{pi}] ({name}-{pid})"
                if pid in seen:
                    bad(pwhere, f"partition {pid} appears twice", "duplicate_partition")
                    continue
                seen.add(pid)
                reps = p.get("replicas")
                if not isinstance(reps, list) or not reps or not all(_is_int(r) for r in reps):
                    bad(f"{pwhere}.replicas", f"must be a non-empty list of broker ids, got {reps!r}",
                        "bad_replicas")
                    continue
                ok = True
                for ri, r in enumerate(reps):
                    if r not in brokers:
                        bad(f"{pwhere}.replicas[{ri}]", f"broker {r} is not in brokers", "unknown_broker")
                        ok = False
                if len(set(reps)) != len(reps):
                    bad(f"{pwhere}.replicas", f"lists a broker twice: {reps}", "duplicate_replica")
                    ok = False
                size = p.get("size_bytes", 0)
                if not _is_num(size) or size < 0:
                    bad(f"{pwhere}.size_bytes", f"must be a number >= 0, got {size!r}", "bad_size")
                    ok = False
                rate = p.get("bytes_in_per_sec", 0) or 0
                if not _is_num(rate) or rate < 0:
                    bad(f"{pwhere}.bytes_in_per_sec", f"must be a number >= 0, got {rate!r}", "bad_rate")
                    ok = False
                leader = p.get("leader", reps[0])
                if leader is None:
                    leader = -1
                if not _is_int(leader) or (leader != -1 and leader not in reps):
                    bad(f"{pwhere}.leader", f"must be one of the replicas {reps} or -1, got {leader!r}",
                        "bad_leader")
                    ok = False
                raw_ld = p.get("log_dirs")
                dirs_known = raw_ld is not None
                if raw_ld is not None and (not isinstance(raw_ld, list) or len(raw_ld) != len(reps)):
                    bad(f"{pwhere}.log_dirs", f"must list one log dir per replica ({len(reps)}), got "
                                              f"{raw_ld!r}", "bad_log_dirs")
                    ok = False
                if not ok:
                    continue
                resolved: list[str] = []
                for ri, r in enumerate(reps):
                    paths = [d.path for d in brokers[r].log_dirs]
                    d = raw_ld[ri] if raw_ld is not None else ANY
                    if d == ANY or d is None:
                        dirs_known = dirs_known and len(paths) == 1
                        resolved.append(paths[0])
                    elif d in paths:
                        resolved.append(d)
                    else:
                        bad(f"{pwhere}.log_dirs[{ri}]", f"{d!r} is not a log dir of broker {r} "
                                                        f"({', '.join(paths)})", "unknown_log_dir")
                        ok = False
                if not ok:
                    continue
                partitions.append(Partition(
                    index=len(partitions), topic=name, partition=pid, replicas=tuple(reps),
                    leader=leader, size_bytes=float(size), bytes_in_per_sec=float(rate),
                    log_dirs=tuple(resolved), dirs_known=dirs_known, min_isr=min_isr))
        if problems:
            raise SnapshotError(problems)
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
        """Initialise counters from aggregates computed elsewhere (Spark, see spark_stats).

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
