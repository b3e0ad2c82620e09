"""State and replication physics of the simulated Kafka cluster (no sockets).

The model holds brokers, topics, partitions and replicas, and advances replication in
simulated time: followers out of sync fetch from the leader within per-broker network
capacity and the KIP-73 quotas, future replicas (KIP-113) copy within the intra-broker
quota, the ISR grows and shrinks, leaders fail over, reassignments (KIP-455) run and
complete the way the Kafka controller runs them.

Scale: a cluster of 100 brokers and 100k partitions must tick every 10 ms. So nothing
loops over every partition per tick: a partition's log grows lazily
(``base_bytes + rate * (t - base_t)``), a caught-up replica ("tracking") has no state of
its own but follows the leader's log, in-sync replication traffic is kept as per-broker
aggregates, and only "active" partitions (a follower catching up, a future replica
copying) are visited by the physics.

Every public method takes ``self.lock`` (the wire server calls from its event loop, tests
from other threads). Kafka-level errors come back as ``(code, message)``, never raised.
"""
from __future__ import annotations

import base64
import bisect
import functools
import gc
import math
import random
import re
import struct
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

from kafka_sim import errors as E
from kafka_sim.configs import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfigState,
    ConfigEntry,
    ConfigValueError,
    NotDynamic,
    UnknownConfig,
    apply_incremental,
    normalize,
    parse_throttled_replicas,
    validate_broker_update,
    validate_topic_configs,
)
from kafka_sim.model_physics import allocate
from kafka_sim.model_placement import assign_replicas

__all__ = ["Broker", "ClusterModel", "LogDir", "Partition", "Replica", "Topic", "ConfigEntry"]

DEFAULT_NETWORK_BYTES_PER_SEC = 125_000_000.0
#: Disk copy speed of one broker for KIP-113 moves when no quota is set.
DEFAULT_DISK_BYTES_PER_SEC = 500_000_000.0
DEFAULT_LOG_DIR = "/var/lib/kafka/data"
DEFAULT_LOG_DIR_CAPACITY = 1e12

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

#: A follower within this many bytes of the leader counts as caught up (float rounding).
_CATCH_UP_EPS = 0.5
#: Bound on physics sub-steps per advance; beyond it the remaining time is one step.
_MAX_SUBSTEPS = 256
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_BATCH_HEADER = 61

F = TypeVar("F", bound=Callable[..., Any])
_NO_RECORDS: tuple = ()


def _locked(fn: F) -> F:
    """Run the method under the model's lock."""

    @functools.wraps(fn)
    def wrapper(self: "ClusterModel", *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return fn(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------- state objects

@dataclass(slots=True)
class LogDir:
    """One log directory (disk) of a broker."""

    path: str
    capacity_bytes: float


@dataclass(slots=True)
class Broker:
    """One broker. ``alive`` is False between stop_broker and start_broker."""

    id: int
    rack: str | None
    log_dirs: list[LogDir]
    alive: bool = True
    network_bytes_per_sec: float = DEFAULT_NETWORK_BYTES_PER_SEC
    disk_bytes_per_sec: float = DEFAULT_DISK_BYTES_PER_SEC

    def dir_paths(self) -> list[str]:
        """Paths of this broker's log dirs, in configured order."""
        return [d.path for d in self.log_dirs]


class Replica:
    """One replica of a partition on one broker.

    A *tracking* replica is caught up: it holds exactly the leader's log, so its size and
    log end offset are the partition's. Otherwise it holds its own byte count and its log
    end offset is the last record batch fully inside those bytes.
    """

    __slots__ = ("broker", "log_dir", "tracking", "_bytes", "future_log_dir", "future_bytes",
                 "caught_up_at", "partition")

    def __init__(self, partition: "Partition", broker: int, log_dir: str, tracking: bool, size: float = 0.0,
                 now: float = 0.0) -> None:
        self.partition = partition
        self.broker = broker
        self.log_dir = log_dir
        self.tracking = tracking
        self._bytes = float(size)
        self.future_log_dir: str | None = None
        self.future_bytes = 0.0
        self.caught_up_at = now  # last time this replica was caught up (ISR lag timer)

    @property
    def size_bytes(self) -> int:
        """Bytes of this replica's log."""
        return int(self.partition.log_bytes() if self.tracking else self._bytes)

    def exact_bytes(self) -> float:
        """Bytes of this replica's log, unrounded."""
        return self.partition.log_bytes() if self.tracking else self._bytes

    @property
    def log_end_offset(self) -> int:
        """Offset of the next record this replica will hold."""
        return self.partition.leo if self.tracking else self.partition.offset_at(self._bytes)

    @property
    def future_size_bytes(self) -> int:
        """Bytes copied so far into the future replica (0 without one)."""
        return int(self.future_bytes) if self.future_log_dir is not None else 0

    @property
    def future_log_end_offset(self) -> int:
        """Log end offset of the future replica (-1 without one)."""
        if self.future_log_dir is None:
            return -1
        return self.partition.offset_at(self.future_bytes)

    def __repr__(self) -> str:
        return (f"Replica(broker={self.broker}, log_dir={self.log_dir!r}, size_bytes={self.size_bytes}, "
                f"tracking={self.tracking}, future_log_dir={self.future_log_dir!r})")


class Partition:
    """One partition: assignment, ISR, leader and the leader's log.

    The log is a byte count growing at ``bytes_in_per_sec`` while a leader is up, plus the
    record batches produced to it (each remembering the byte position where it ends, so a
    follower holding N bytes holds exactly the batches that end within N).
    """

    __slots__ = ("topic", "index", "replicas", "isr", "leader", "leader_epoch", "partition_epoch", "adding",
                 "removing", "bytes_in_per_sec", "_reps", "_base_bytes", "_base_t", "_rate", "_model", "leo",
                 "_rec_base", "_rec_end", "_rec_pos", "_rec_data", "_rec_maxts")

    def __init__(self, model: "ClusterModel", topic: str, index: int, replicas: list[int], leader: int,
                 size: float, bytes_in: float) -> None:
        self._model = model
        self.topic = topic
        self.index = index
        self.replicas = list(replicas)
        self.isr = list(replicas)
        self.leader = leader
        self.leader_epoch = 0
        self.partition_epoch = 0
        self.adding: list[int] = []
        self.removing: list[int] = []
        self.bytes_in_per_sec = float(bytes_in)
        self._reps: dict[int, Replica] = {}
        self._base_bytes = float(size)
        self._base_t = model._t
        self._rate = 0.0
        self.leo = 0
        # record batches, created on the first produce (most partitions never get any)
        self._rec_base: list[int] = _NO_RECORDS  # type: ignore[assignment]
        self._rec_end: list[int] = _NO_RECORDS  # type: ignore[assignment]
        self._rec_pos: list[float] = _NO_RECORDS  # type: ignore[assignment]
        self._rec_data: list[bytes] = _NO_RECORDS  # type: ignore[assignment]
        self._rec_maxts: list[int] = _NO_RECORDS  # type: ignore[assignment]

    # -- read helpers
    def replica(self, broker: int) -> Replica | None:
        """The replica on ``broker`` (None if the broker holds none)."""
        return self._reps.get(broker)

    def offline_replicas(self) -> list[int]:
        """Replicas whose broker is stopped."""
        brokers = self._model.brokers
        return [b for b in self.replicas if not brokers[b].alive]

    def log_bytes(self) -> float:
        """Bytes in the leader's log at the model's physics time."""
        return self._base_bytes + self._rate * (self._model._t - self._base_t)

    def offset_at(self, nbytes: float) -> int:
        """Log end offset of a replica holding the first ``nbytes`` bytes of the log."""
        if not self._rec_pos:
            return 0
        i = bisect.bisect_right(self._rec_pos, nbytes + _CATCH_UP_EPS)
        return self._rec_end[i - 1] if i else 0

    def high_watermark(self) -> int:
        """Min log end offset over the ISR."""
        if not self.isr:
            return 0
        return min(self._reps[b].log_end_offset for b in self.isr if b in self._reps)

    @property
    def in_flight(self) -> bool:
        """True while a reassignment is running."""
        return bool(self.adding or self.removing)

    def target_replicas(self) -> list[int]:
        """Replicas the partition ends with (the reassignment target, or the replicas)."""
        return [b for b in self.replicas if b not in self.removing]

    def original_replicas(self) -> list[int]:
        """Replicas before the in-flight reassignment (the replicas if none)."""
        return [b for b in self.replicas if b not in self.adding]

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, replicas={self.replicas}, isr={self.isr}, "
                f"leader={self.leader}, epoch={self.leader_epoch}, adding={self.adding}, removing={self.removing})")


@dataclass
class Topic:
    """A topic and its partitions. ``configs`` are its dynamic overrides (normalized)."""

    name: str
    topic_id: uuid.UUID
    internal: bool
    partitions: list[Partition]
    configs: dict[str, str] = field(default_factory=dict)
    leader_throttled: bool | frozenset[tuple[int, int]] | None = None
    follower_throttled: bool | frozenset[tuple[int, int]] | None = None

    def refresh_throttles(self) -> None:
        """Re-parse the KIP-73 throttled-replica lists after a config change."""
        self.leader_throttled = parse_throttled_replicas(self.configs.get("leader.replication.throttled.replicas"))
        self.follower_throttled = parse_throttled_replicas(
            self.configs.get("follower.replication.throttled.replicas"))


def _throttled(spec: bool | frozenset[tuple[int, int]] | None, partition: int, broker: int) -> bool:
    if spec is None:
        return False
    if spec is True:
        return True
    return (partition, broker) in spec  # type: ignore[operator]


class _Flow:
    """One transfer in a physics step."""

    __slots__ = ("kind", "partition", "replica", "resources", "gap", "grow", "rate")

    def __init__(self, kind: int, partition: Partition, replica: Replica, resources: tuple, gap: float,
                 grow: float) -> None:
        self.kind = kind  # 0 follower fetch, 1 future replica copy
        self.partition = partition
        self.replica = replica
        self.resources = resources
        self.gap = gap
        self.grow = grow
        self.rate = 0.0


# ---------------------------------------------------------------- the model

class ClusterModel:
    """Brokers, topics, replicas, configs and replication physics in simulated time.

    :param snapshot: a snapshot dict (DESIGN.md format; see ``from_snapshot`` notes)
    :param time_scale: simulated seconds per wall-clock second; 0 = manual time (advance_by)
    :param clock: wall clock in seconds (injectable for tests)
    """

    def __init__(self, snapshot: dict, time_scale: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.lock = threading.RLock()
        self.time_scale = float(time_scale)
        self._clock = clock
        self._start = clock()
        self._offset = 0.0
        self._t = 0.0
        self.writes: Counter[str] = Counter()
        self.state_version = 0  # bumped on every metadata-visible change (cache key for the server)
        self.brokers: dict[int, Broker] = {}
        self.topics: dict[str, Topic] = {}
        self.configs = BrokerConfigState()
        self._by_broker: dict[int, dict[Partition, None]] = {}
        self._active: set[Partition] = set()
        self._dirty: set[Partition] = set()
        self._contrib: dict[Partition, tuple[tuple[int, float, float], ...]] = {}
        self._steady_out: dict[int, float] = {}
        self._steady_in: dict[int, float] = {}
        self._inflight: dict[tuple[str, int], Partition] = {}
        self._preferred_dirs: dict[tuple[int, str, int], str] = {}
        self._rates: dict[int, tuple[float, float, float]] = {}
        self._plan: tuple[list[_Flow], float, list[tuple[Partition, Replica, float]]] | None = None
        self._rng = random.Random(snapshot.get("seed", 0))
        self.cluster_id = str(snapshot.get("cluster_id") or
                              base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
        self._load(snapshot)

    # ------------------------------------------------------------ loading
    def _load(self, snap: dict) -> None:
        # hundreds of thousands of long-lived objects: the cyclic GC would rescan them all
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._load_snapshot(snap)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _load_snapshot(self, snap: dict) -> None:
        for b in snap.get("brokers", []):
            bid = int(b["id"])
            dirs = [LogDir(str(d["path"]), float(d.get("capacity_bytes", DEFAULT_LOG_DIR_CAPACITY)))
                    for d in b.get("log_dirs") or []] or [LogDir(DEFAULT_LOG_DIR, DEFAULT_LOG_DIR_CAPACITY)]
            self.brokers[bid] = Broker(
                id=bid, rack=b.get("rack"), log_dirs=dirs,
                network_bytes_per_sec=float(b.get("network_bytes_per_sec") or DEFAULT_NETWORK_BYTES_PER_SEC),
                disk_bytes_per_sec=float(b.get("disk_bytes_per_sec") or DEFAULT_DISK_BYTES_PER_SEC))
            static = {str(k): str(v) for k, v in (b.get("configs") or {}).items()}
            for name, value in static.items():
                key = BROKER_CONFIGS.get(name)
                if key is None:
                    raise ValueError(f"snapshot broker {bid}: unknown broker config {name!r}")
                try:
                    static[name] = normalize(key, value)
                except ConfigValueError as exc:
                    raise ValueError(f"snapshot broker {bid}: {exc}") from None
            self.configs.static[bid] = static
            self._by_broker[bid] = {}
        if not self.brokers:
            raise ValueError("snapshot has no brokers")
        for t in snap.get("topics", []):
            name = str(t["name"])
            try:
                cfg = validate_topic_configs({str(k): str(v) for k, v in (t.get("configs") or {}).items()})
            except ConfigValueError as exc:
                raise ValueError(f"snapshot topic {name}: {exc}") from None
            topic = Topic(name, uuid.uuid4(), name.startswith("__"), [], cfg)
            topic.refresh_throttles()
            parts = sorted(t.get("partitions", []), key=lambda p: int(p["partition"]))
            for i, p in enumerate(parts):
                if int(p["partition"]) != i:
                    raise ValueError(f"snapshot topic {name}: partitions must be numbered 0..n-1")
                replicas = [int(x) for x in p["replicas"]]
                for b in replicas:
                    if b not in self.brokers:
                        raise ValueError(f"snapshot {name}-{i}: unknown broker {b}")
                leader = int(p.get("leader", replicas[0]) if p.get("leader") is not None else replicas[0])
                if leader not in replicas:
                    leader = replicas[0]
                dirs = p.get("log_dirs") or [None] * len(replicas)
                part = self._new_partition(topic, i, replicas, leader, float(p.get("size_bytes", 0) or 0),
                                           float(p.get("bytes_in_per_sec", 0) or 0), dirs)
                topic.partitions.append(part)
            self.topics[name] = topic
        for topic in self.topics.values():
            for part in topic.partitions:
                self._dirty.add(part)
        self._refresh_rates()
        self._flush_dirty()

    def _new_partition(self, topic: Topic, index: int, replicas: list[int], leader: int, size: float,
                       bytes_in: float, dirs: list[str | None]) -> Partition:
        part = Partition(self, topic.name, index, replicas, leader, size, bytes_in)
        for b, d in zip(replicas, dirs):
            broker = self.brokers[b]
            path = d if d not in (None, "any") else broker.log_dirs[0].path
            if path != broker.log_dirs[0].path and path not in broker.dir_paths():
                raise ValueError(f"{topic.name}-{index}: broker {b} has no log dir {path!r}")
            part._reps[b] = Replica(part, b, path, True, 0.0, self._t)
            self._by_broker[b][part] = None
        part._rate = bytes_in if self.brokers[leader].alive else 0.0
        return part

    # ------------------------------------------------------------ time
    def now(self) -> float:
        """Simulated seconds since the model started."""
        if self.time_scale > 0:
            return (self._clock() - self._start) * self.time_scale + self._offset
        return self._offset

    @_locked
    def advance(self) -> None:
        """Run the physics up to ``now()`` (the server calls this every ~10 ms)."""
        self._run(self.now())

    @_locked
    def advance_by(self, sim_seconds: float) -> None:
        """Move simulated time forward by ``sim_seconds`` and run the physics.

        :param sim_seconds: simulated seconds (>= 0)
        """
        if sim_seconds < 0:
            raise ValueError("time only moves forward")
        self._offset += sim_seconds
        self._run(self.now())

    def sim_time(self) -> float:
        """Simulated seconds up to which the physics has run."""
        return self._t

    # ------------------------------------------------------------ physics
    def _refresh_rates(self) -> None:
        """Cache the three quota rates of every broker (inf = unthrottled)."""
        for bid in self.brokers:
            vals = []
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                         "replica.alter.log.dirs.io.max.bytes.per.second"):
                v = self.configs.long_value(bid, name)
                vals.append(math.inf if v >= 9223372036854775807 else float(v))
            self._rates[bid] = (vals[0], vals[1], vals[2])
        self._plan = None

    def _lag_max(self, broker: int) -> float:
        return self.configs.long_value(broker, "replica.lag.time.max.ms") / 1000.0

    def _touch(self, p: Partition) -> None:
        """Mark a partition changed: aggregates and active set are refreshed before physics."""
        self._dirty.add(p)
        p.partition_epoch += 1
        self.state_version += 1
        self._plan = None

    def _rebase(self, p: Partition) -> None:
        """Freeze the lazily grown log at the current time and re-derive its growth rate."""
        p._base_bytes = p.log_bytes()
        p._base_t = self._t
        leader_up = p.leader >= 0 and self.brokers[p.leader].alive
        p._rate = p.bytes_in_per_sec if leader_up else 0.0

    def _flush_dirty(self) -> None:
        """Refresh in-sync traffic aggregates and the active set of changed partitions."""
        if not self._dirty:
            return
        self._plan = None
        brokers = self.brokers
        for p in self._dirty:
            old = self._contrib.pop(p, ())
            for b, out, inn in old:
                self._steady_out[b] = self._steady_out.get(b, 0.0) - out
                self._steady_in[b] = self._steady_in.get(b, 0.0) - inn
            topic = self.topics.get(p.topic)
            exists = topic is not None and p.index < len(topic.partitions) and topic.partitions[p.index] is p
            if not exists:  # deleted topic: its contributions are gone, nothing to simulate
                self._active.discard(p)
                continue
            self._rebase(p)
            leader_up = p.leader >= 0 and brokers[p.leader].alive
            active = False
            contrib: list[tuple[int, float, float]] = []
            rate = p._rate
            followers = 0
            for b in p.replicas:
                r = p._reps[b]
                alive = brokers[b].alive
                if r.future_log_dir is not None and alive:
                    active = True
                if b == p.leader:
                    continue
                if r.tracking and alive and leader_up:
                    if rate > 0:
                        contrib.append((b, 0.0, rate))
                        followers += 1
                elif alive and leader_up:
                    active = True
            if leader_up and rate > 0:
                contrib.append((p.leader, rate * followers, rate))
            for b, out, inn in contrib:
                self._steady_out[b] = self._steady_out.get(b, 0.0) + out
                self._steady_in[b] = self._steady_in.get(b, 0.0) + inn
            if contrib:
                self._contrib[p] = tuple(contrib)
            if active:
                self._active.add(p)
            else:
                self._active.discard(p)
        self._dirty.clear()

    def _collect_flows(self) -> list[_Flow]:
        brokers = self.brokers
        flows: list[_Flow] = []
        follow_of: dict[int, _Flow] = {}
        futures: list[_Flow] = []
        for p in self._active:
            topic = self.topics[p.topic]
            leader = p.leader
            leader_up = leader >= 0 and brokers[leader].alive
            log = p.log_bytes()
            for b in p.replicas:
                r = p._reps[b]
                if not brokers[b].alive:
                    continue
                if b != leader and not r.tracking and leader_up:
                    res: list = [("o", leader), ("i", b)]
                    if b not in p.isr:  # KAFKA-4313: replicas in the ISR are never throttled
                        if _throttled(topic.leader_throttled, p.index, leader):
                            res.append(("lt", leader))
                        if _throttled(topic.follower_throttled, p.index, b):
                            res.append(("ft", b))
                    f = _Flow(0, p, r, tuple(res), max(0.0, log - r._bytes), p._rate)
                    flows.append(f)
                    follow_of[id(r)] = f
                if r.future_log_dir is not None:
                    src = r.exact_bytes()
                    f = _Flow(1, p, r, (("d", b), ("a", b)), max(0.0, src - r.future_bytes),
                              p._rate if r.tracking else 0.0)
                    futures.append(f)
        for f in futures:
            src_flow = follow_of.get(id(f.replica))
            if src_flow is not None:
                f.grow = -1.0  # resolved after allocation: follows the current replica's fetch rate
        return flows + futures

    def _capacities(self, flows: list[_Flow]) -> dict:
        cap: dict = {}
        for f in flows:
            for key in f.resources:
                if key in cap:
                    continue
                kind, b = key
                broker = self.brokers[b]
                if kind == "o":
                    cap[key] = max(0.0, broker.network_bytes_per_sec - self._steady_out.get(b, 0.0))
                elif kind == "i":
                    cap[key] = max(0.0, broker.network_bytes_per_sec - self._steady_in.get(b, 0.0))
                elif kind == "lt":
                    cap[key] = self._rates[b][0]
                elif kind == "ft":
                    cap[key] = self._rates[b][1]
                elif kind == "a":
                    cap[key] = self._rates[b][2]
                elif kind == "d":
                    cap[key] = broker.disk_bytes_per_sec
        return cap

    def _make_plan(self) -> tuple[list[_Flow], float, list[tuple[Partition, Replica, float]]]:
        """Rates of every flow and the next event time; valid until something changes.

        Between events (a flow finishing, an ISR lag deadline) every rate is constant, so
        ticks only integrate bytes; any state or config change drops the plan.
        """
        flows = self._collect_flows()
        rates = allocate([f.resources for f in flows], self._capacities(flows))
        follow_rate = {id(f.replica): r for f, r in zip(flows, rates) if f.kind == 0}
        now = self._t
        event = math.inf
        for f, rate in zip(flows, rates):
            f.rate = rate
            if f.grow < 0:
                f.grow = follow_rate.get(id(f.replica), 0.0)
            net = rate - f.grow
            if f.gap <= _CATCH_UP_EPS:
                event = now
            elif net > 0:
                event = min(event, now + f.gap / net)
        # ISR members that stopped being caught up leave after replica.lag.time.max.ms
        lagging: list[tuple[Partition, Replica, float]] = []
        for p in self._active:
            if p.leader < 0 or len(p.isr) < 2:
                continue  # the ISR never shrinks below the leader itself
            for b in p.isr:
                r = p._reps.get(b)
                if r is not None and b != p.leader and not r.tracking and self.brokers[b].alive:
                    deadline = r.caught_up_at + self._lag_max(p.leader)
                    lagging.append((p, r, deadline))
                    event = min(event, max(now, deadline))
        return flows, event, lagging

    def _run(self, until: float) -> None:
        """Advance the physics from ``self._t`` to ``until``, event by event."""
        self._flush_dirty()
        steps = 0
        first = True
        # one pass even for zero elapsed time, so empty partitions finish their moves at once
        while self._t < until or first:
            first = False
            if not self._active:
                self._t = max(self._t, until)
                self._plan = None
                break
            if self._plan is None:
                self._plan = self._make_plan()
            flows, event_at, lagging = self._plan
            steps += 1
            forced = steps > _MAX_SUBSTEPS  # too many events in one call: finish in one step
            stop_at = until if forced else min(until, event_at)
            dt = max(0.0, stop_at - self._t)
            if dt > 0:
                for f in flows:
                    if f.kind == 0:
                        f.replica._bytes += f.rate * dt
                    else:
                        f.replica.future_bytes += f.rate * dt
                self._t = stop_at
            if self._t >= event_at or forced:
                self._settle(flows, lagging)
                self._plan = None
                self._flush_dirty()

    def _settle(self, flows: list[_Flow], lagging: list[tuple[Partition, Replica, float]]) -> None:
        """At an event: clamp copies to their source, finish caught-up flows, expire lagging ISR members."""
        finished: list[_Flow] = []
        for f in flows:
            r = f.replica
            if f.kind == 0:
                target = f.partition.log_bytes()
                if target - r._bytes <= _CATCH_UP_EPS:
                    r._bytes = target
                    finished.append(f)
            else:
                src = r.exact_bytes()
                if src - r.future_bytes <= _CATCH_UP_EPS:
                    r.future_bytes = src
                    finished.append(f)
        for f in finished:
            if f.kind == 0:
                self._caught_up(f.partition, f.replica)
        for f in finished:
            r = f.replica
            if f.kind == 1 and r.future_log_dir is not None and f.partition._reps.get(r.broker) is r:
                if r.exact_bytes() - r.future_bytes <= _CATCH_UP_EPS:
                    self._swap_future(f.partition, r)
        for p, r, deadline in lagging:
            if self._t >= deadline and not r.tracking and r.broker in p.isr and len(p.isr) > 1:
                p.isr.remove(r.broker)
                self._touch(p)

    def _caught_up(self, p: Partition, r: Replica) -> None:
        """A follower reached the leader's log end: it tracks the leader and joins the ISR."""
        r.tracking = True
        r._bytes = 0.0
        r.caught_up_at = self._t
        if r.broker not in p.isr and self.brokers[r.broker].alive and p.leader >= 0:
            p.isr.append(r.broker)
        self._touch(p)
        self._maybe_complete(p)

    def _swap_future(self, p: Partition, r: Replica) -> None:
        """KIP-113: the future replica caught up; it replaces the current one in its dir."""
        r.log_dir = r.future_log_dir  # type: ignore[assignment]
        r.future_log_dir = None
        r.future_bytes = 0.0
        self._touch(p)

    # ------------------------------------------------------------ leadership
    def _first_live_isr(self, p: Partition, among: Iterable[int] | None = None) -> int:
        isr = set(p.isr)
        for b in (among if among is not None else p.replicas):
            if b in isr and self.brokers[b].alive and b in p._reps:
                return b
        return -1

    def _change_leader(self, p: Partition, new: int) -> None:
        """Make ``new`` the leader (-1: none), bump the epoch; the log becomes the new leader's."""
        if new == p.leader:
            return
        self._rebase(p)
        if new >= 0:
            r = p._reps[new]
            if not r.tracking:
                self._truncate(p, r._bytes)
                r.tracking = True
                r._bytes = 0.0
                r.caught_up_at = self._t
        p.leader = new
        p.leader_epoch += 1
        self._rebase(p)
        self._touch(p)

    def _truncate(self, p: Partition, nbytes: float) -> None:
        """The log becomes the first ``nbytes`` bytes (a shorter replica became leader)."""
        if nbytes < p._base_bytes:
            p._base_bytes = nbytes
            if p._rec_pos:
                cut = bisect.bisect_right(p._rec_pos, nbytes + _CATCH_UP_EPS)
                del p._rec_base[cut:], p._rec_end[cut:], p._rec_pos[cut:], p._rec_data[cut:], p._rec_maxts[cut:]
            p.leo = p._rec_end[-1] if p._rec_end else 0
            for r in p._reps.values():
                if not r.tracking and r._bytes > nbytes:
                    r._bytes = nbytes
                if r.future_log_dir is not None and r.future_bytes > nbytes:
                    r.future_bytes = nbytes

    def _materialize(self, p: Partition, r: Replica) -> None:
        """Give a tracking replica its own byte count (it stops following the leader)."""
        if r.tracking:
            r._bytes = p.log_bytes()
            r.tracking = False
            r.caught_up_at = self._t

    # ------------------------------------------------------------ replicas
    def _dir_usage(self, broker: int) -> dict[str, float]:
        """Bytes held per log dir of a broker (current and future replicas)."""
        usage = {d.path: 0.0 for d in self.brokers[broker].log_dirs}
        t = self._t
        for p in self._by_broker[broker]:
            r = p._reps[broker]
            # inlined log_bytes(): this loops over every replica of the broker
            size = p._base_bytes + p._rate * (t - p._base_t) if r.tracking else r._bytes
            usage[r.log_dir] = usage.get(r.log_dir, 0.0) + size
            if r.future_log_dir is not None:
                usage[r.future_log_dir] = usage.get(r.future_log_dir, 0.0) + r.future_bytes
        return usage

    def _pick_dir(self, broker: int, expected: float, cache: dict[int, dict[str, float]]) -> str:
        """Log dir for a new replica: the one with the most free bytes (counting what is coming)."""
        if len(self.brokers[broker].log_dirs) == 1:
            return self.brokers[broker].log_dirs[0].path
        if broker not in cache:
            cache[broker] = self._dir_usage(broker)
        usage = cache[broker]
        dirs = self.brokers[broker].log_dirs
        # most free bytes; on a tie the first configured dir
        best = max(range(len(dirs)), key=lambda i: (dirs[i].capacity_bytes - usage.get(dirs[i].path, 0.0), -i))
        path = dirs[best].path
        usage[path] = usage.get(path, 0.0) + expected
        return path

    def _add_replica(self, p: Partition, broker: int, cache: dict[int, dict[str, float]]) -> None:
        path = self._preferred_dirs.pop((broker, p.topic, p.index), None)
        if path is None:
            path = self._pick_dir(broker, p.log_bytes(), cache)
        r = Replica(p, broker, path, False, 0.0, self._t)
        p._reps[broker] = r
        self._by_broker[broker][p] = None

    def _remove_replica(self, p: Partition, broker: int) -> None:
        """Delete a replica and its data (and any future replica)."""
        p._reps.pop(broker, None)
        self._by_broker[broker].pop(p, None)
        if broker in p.isr:
            p.isr.remove(broker)

    # ------------------------------------------------------------ lookup helpers
    def _part(self, topic: str, partition: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition]

    @_locked
    def partition(self, topic: str, partition: int) -> Partition | None:
        """The partition object, or None.

        :param topic: topic name
        :param partition: partition index
        """
        return self._part(topic, partition)

    def _min_isr(self, topic: Topic) -> int:
        raw = topic.configs.get("min.insync.replicas")
        if raw is None:
            raw = self.configs.topic_fallback(None, TOPIC_CONFIGS["min.insync.replicas"])
        return int(raw or 1)

    @_locked
    def min_insync_replicas(self, topic: str) -> int:
        """Effective min.insync.replicas of a topic (topic config, else broker default).

        :param topic: topic name
        """
        t = self.topics.get(topic)
        return 1 if t is None else self._min_isr(t)

    @property
    def metadata_version(self) -> int:
        """Changes whenever anything a Metadata response shows may have changed."""
        return self.state_version

    @property
    def controller_id(self) -> int:
        """The live broker with the lowest id (KRaft brokers report a random live broker)."""
        live = [b for b, br in self.brokers.items() if br.alive]
        return min(live) if live else -1

    @property
    def write_count(self) -> int:
        """Accepted write items so far (configs, reassignments, topics, log-dir moves, elections)."""
        return sum(self.writes.values())

    # ------------------------------------------------------------ faults
    @_locked
    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker: its replicas go offline, it leaves every ISR (unless last), leaders fail over.

        :param broker_id: the broker
        """
        self._run(self.now())
        broker = self.brokers[broker_id]
        if not broker.alive:
            return
        for p in list(self._by_broker[broker_id]):
            self._rebase(p)
        broker.alive = False
        for p in list(self._by_broker[broker_id]):
            r = p._reps[broker_id]
            self._materialize(p, r)
            if broker_id in p.isr and len(p.isr) > 1:
                p.isr.remove(broker_id)
            if p.leader == broker_id:
                self._change_leader(p, self._first_live_isr(p))
            self._rebase(p)
            self._touch(p)
        self._refresh_rates()
        self.state_version += 1
        self._flush_dirty()

    @_locked
    def start_broker(self, broker_id: int) -> None:
        """Restart a broker: its replicas catch up and rejoin the ISR; leaderless partitions recover.

        :param broker_id: the broker
        """
        self._run(self.now())
        broker = self.brokers[broker_id]
        if broker.alive:
            return
        broker.alive = True
        for p in list(self._by_broker[broker_id]):
            if p.leader < 0:
                self._change_leader(p, self._first_live_isr(p))
            self._rebase(p)
            self._touch(p)
        self.state_version += 1
        self._flush_dirty()

    # ------------------------------------------------------------ read side
    @_locked
    def partition_state(self, topic: str, partition: int) -> dict:
        """Plain-dict view of one partition (tests, SimulatedCluster.partition_state).

        :param topic: topic name
        :param partition: partition index
        """
        p = self._part(topic, partition)
        if p is None:
            raise KeyError(f"{topic}-{partition}")
        return {
            "topic": topic, "partition": partition, "replicas": list(p.replicas), "isr": list(p.isr),
            "leader": p.leader, "leader_epoch": p.leader_epoch, "adding": list(p.adding),
            "removing": list(p.removing), "offline": p.offline_replicas(),
            "log_dirs": {b: p._reps[b].log_dir for b in p.replicas},
            "future_log_dirs": {b: r.future_log_dir for b, r in p._reps.items() if r.future_log_dir},
            "sizes": {b: p._reps[b].size_bytes for b in p.replicas},
            "log_end_offsets": {b: p._reps[b].log_end_offset for b in p.replicas},
            "high_watermark": p.high_watermark(), "size_bytes": int(p.log_bytes()),
        }

    @_locked
    def high_watermark(self, topic: str, partition: int) -> int:
        """High watermark of a partition (-1 if unknown).

        :param topic: topic name
        :param partition: partition index
        """
        p = self._part(topic, partition)
        return -1 if p is None else p.high_watermark()

    @_locked
    def broker_configs(self, broker_id: int | str) -> dict[str, str]:
        """Dynamic configs set on a broker ("" = cluster default).

        :param broker_id: broker id or ""
        """
        return dict(self.configs.dynamic.get(str(broker_id), {}))

    @_locked
    def topic_configs(self, topic: str) -> dict[str, str]:
        """Dynamic configs set on a topic.

        :param topic: topic name
        """
        return dict(self.topics[topic].configs)

    @_locked
    def describe_configs(self, resource_type: int, name: str, keys: list[str] | None,
                         include_synonyms: bool = True) -> tuple[int, str | None, list[ConfigEntry]]:
        """DescribeConfigs for one resource.

        :param resource_type: 2 topic, 4 broker
        :param name: topic name, broker id, or "" for the cluster default
        :param keys: config names to describe, None for all
        :param include_synonyms: fill the synonyms of each entry
        """
        if not keys:
            keys = None  # null and empty both mean every config (Kafka's ConfigHelper)
        if resource_type == RESOURCE_TOPIC:
            topic = self.topics.get(name)
            if topic is None:
                return E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.", []
            return E.NONE, None, self.configs.describe_topic(topic.configs, keys, include_synonyms)
        if resource_type == RESOURCE_BROKER:
            if name == "":
                return E.NONE, None, self.configs.describe_default(keys, include_synonyms)
            try:
                bid = int(name)
            except ValueError:
                return E.INVALID_REQUEST, f"Unable to parse broker name {name!r} as a base 10 number.", []
            broker = self.brokers.get(bid)
            if broker is None:
                return E.INVALID_REQUEST, f"Broker {bid} does not exist.", []
            identity = {"broker.id": str(bid), "node.id": str(bid), "log.dirs": ",".join(broker.dir_paths())}
            if broker.rack is not None:
                identity["broker.rack"] = str(broker.rack)
            return E.NONE, None, self.configs.describe_broker(bid, identity, keys, include_synonyms)
        return E.INVALID_REQUEST, f"Unsupported resource type {resource_type}", []

    @_locked
    def list_reassignments(self, topics: list[tuple[str, list[int]]] | None = None
                           ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """In-flight reassignments (ListPartitionReassignments).

        :param topics: (topic, partitions) to look at, None for all
        """
        if topics is None:
            items = sorted(self._inflight.items())
        else:
            items = [((t, i), self._inflight[(t, i)]) for t, parts in topics for i in parts
                     if (t, i) in self._inflight]
        return [(t, i, list(p.replicas), list(p.adding), list(p.removing)) for (t, i), p in items]

    @_locked
    def describe_log_dirs(self, broker_id: int, topics: list[tuple[str, list[int]]] | None = None
                          ) -> list[tuple[str, int, int, int, list[tuple[str, list[tuple[int, int, int, bool]]]]]]:
        """DescribeLogDirs of one broker.

        Current replicas report offset_lag = max(HW - LEO, 0) (0 when in sync); future
        replicas report how far they are behind the current replica.

        :param broker_id: the broker
        :param topics: (topic, partitions) to report, None for all
        """
        broker = self.brokers.get(broker_id)
        if broker is None:
            return []
        wanted: set[tuple[str, int]] | None = None
        if topics is not None:
            wanted = {(t, i) for t, parts in topics for i in parts}
        per_dir: dict[str, dict[str, list[tuple[int, int, int, bool]]]] = {d.path: {} for d in broker.log_dirs}
        used: dict[str, float] = {d.path: 0.0 for d in broker.log_dirs}
        for p in self._by_broker[broker_id]:
            r = p._reps[broker_id]
            size = r.exact_bytes()
            used[r.log_dir] = used.get(r.log_dir, 0.0) + size
            if r.future_log_dir is not None:
                used[r.future_log_dir] = used.get(r.future_log_dir, 0.0) + r.future_bytes
            if wanted is not None and (p.topic, p.index) not in wanted:
                continue
            leo = r.log_end_offset
            # a caught-up replica holds the whole log: lag 0 without computing the HW
            lag = 0 if r.tracking else max(p.high_watermark() - leo, 0)
            per_dir.setdefault(r.log_dir, {}).setdefault(p.topic, []).append((p.index, int(size), lag, False))
            if r.future_log_dir is not None:
                per_dir.setdefault(r.future_log_dir, {}).setdefault(p.topic, []).append(
                    (p.index, int(r.future_bytes), max(0, leo - r.future_log_end_offset), True))
        out = []
        for d in broker.log_dirs:
            topics_out = [(t, sorted(parts)) for t, parts in sorted(per_dir.get(d.path, {}).items())]
            out.append((d.path, E.NONE, int(d.capacity_bytes), int(max(0.0, d.capacity_bytes - used[d.path])),
                        topics_out))
        return out

    @_locked
    def list_offsets(self, broker_id: int, topic: str, partition: int, timestamp: int
                     ) -> tuple[int, int, int, int]:
        """ListOffsets on the leader: -1 latest (HW), -2 earliest, -3 max timestamp, else by time.

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

    @_locked
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
        # follower is, and a longer gap only makes the planned event early (then re-planned).
        self._rebase(p)
        base = p.leo
        if p._rec_base is _NO_RECORDS:
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
        return E.NONE, base, p.leo

    @_locked
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

    # ------------------------------------------------------------ configs (write)
    @_locked
    def incremental_alter_configs(self, resource_type: int, name: str, ops: list[tuple[str, int, str | None]],
                                  validate_only: bool = False) -> tuple[int, str | None]:
        """IncrementalAlterConfigs on one resource (op 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT).

        :param resource_type: 2 topic, 4 broker
        :param name: topic name, broker id, or "" for the cluster default
        :param ops: (key, op, value)
        :param validate_only: check only, change nothing
        """
        keys = [k for k, _op, _v in ops]
        if len(set(keys)) != len(keys):
            dup = sorted({k for k in keys if keys.count(k) > 1})
            return E.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(dup)}"
        return self._alter_configs(resource_type, name, validate_only, "IncrementalAlterConfigs",
                                   lambda current, defs, default_of: apply_incremental(current, ops, defs, default_of))

    @_locked
    def alter_configs(self, resource_type: int, name: str, configs: dict[str, str | None],
                      validate_only: bool = False) -> tuple[int, str | None]:
        """Legacy AlterConfigs: replace every dynamic config of the resource.

        :param resource_type: 2 topic, 4 broker
        :param name: topic name, broker id, or "" for the cluster default
        :param configs: the complete new set (None values are dropped)
        :param validate_only: check only, change nothing
        """
        return self._alter_configs(resource_type, name, validate_only, "AlterConfigs",
                                   lambda _c, _d, _f: {k: v for k, v in configs.items() if v is not None})

    def _alter_configs(self, resource_type: int, name: str, validate_only: bool, api: str,
                       compute: Callable[..., dict[str, str]]) -> tuple[int, str | None]:
        self._run(self.now())
        if resource_type == RESOURCE_TOPIC:
            topic = self.topics.get(name)
            if topic is None:
                return E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
            try:
                new = compute(topic.configs, TOPIC_CONFIGS, lambda k: self.configs.topic_fallback(None, k))
                new = validate_topic_configs(new)
            except ConfigValueError as exc:
                return E.INVALID_CONFIG, str(exc)
            if validate_only:
                return E.NONE, None
            topic.configs = new
            topic.refresh_throttles()
            self._plan = None  # throttled-replica lists change which flows are throttled
            self.writes[api] += 1
            self.state_version += 1
            return E.NONE, None
        if resource_type == RESOURCE_BROKER:
            if name != "":
                try:
                    int(name)
                except ValueError:
                    return E.INVALID_REQUEST, f"Unable to parse broker name {name!r} as a base 10 number."
            current = self.configs.dynamic.get(name, {})
            bid = int(name) if name else None
            try:
                new = compute(current, BROKER_CONFIGS, lambda k: self.configs.value(bid, k.name))
                new = validate_broker_update(new, per_broker=bool(name))
            except NotDynamic as exc:
                return E.INVALID_REQUEST, str(exc)
            except UnknownConfig as exc:
                return E.INVALID_CONFIG, str(exc)
            except ConfigValueError as exc:
                return E.INVALID_CONFIG, str(exc)
            if validate_only:
                return E.NONE, None
            self._run(self.now())  # bytes so far moved at the old rates
            if new:
                self.configs.dynamic[name] = new
            else:
                self.configs.dynamic.pop(name, None)
                self.configs.dynamic.setdefault("", {})
            self._refresh_rates()
            self.writes[api] += 1
            self.state_version += 1
            return E.NONE, None
        return E.INVALID_REQUEST, f"Unsupported resource type {resource_type}"

    # ------------------------------------------------------------ reassignment (KIP-455)
    def _validate_assignment(self, replicas: list[int]) -> str | None:
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        seen: set[int] = set()
        for b in replicas:
            if b in seen:
                return f"The manual partition assignment includes the broker {b} more than once."
            seen.add(b)
            if b not in self.brokers:
                return f"The manual partition assignment includes broker {b}, but no such broker is registered."
        return None

    @_locked
    def alter_reassignments(self, items: list[tuple[str, int, list[int] | None]]
                            ) -> list[tuple[str, int, int, str | None]]:
        """AlterPartitionReassignments: start, change or cancel (None) reassignments.

        During a move the replica set is target + original replicas not in target; a new
        target is relative to the original replicas; the move completes once every target
        replica is in the ISR.

        :param items: (topic, partition, target replicas or None to cancel)
        :returns: (topic, partition, code, message) per item
        """
        self._run(self.now())
        out = []
        cache: dict[int, dict[str, float]] = {}
        for topic, index, target in items:
            p = self._part(topic, index)
            if p is None:
                out.append((topic, index, E.UNKNOWN_TOPIC_OR_PARTITION,
                            f"Unable to find partition {topic}-{index}."))
                continue
            if target is None:
                if not p.in_flight:
                    out.append((topic, index, E.NO_REASSIGNMENT_IN_PROGRESS,
                                f"No ongoing reassignment for partition {topic}-{index}."))
                    continue
                self._cancel(p)
            else:
                target = [int(b) for b in target]
                msg = self._validate_assignment(target)
                if msg is not None:
                    out.append((topic, index, E.INVALID_REPLICA_ASSIGNMENT, msg))
                    continue
                self._reassign(p, target, cache)
            self.writes["AlterPartitionReassignments"] += 1
            out.append((topic, index, E.NONE, None))
        self._flush_dirty()
        return out

    def _reassign(self, p: Partition, target: list[int], cache: dict[int, dict[str, float]]) -> None:
        original = p.original_replicas()
        adding = [b for b in target if b not in original]
        removing = [b for b in original if b not in target]
        merged = target + removing
        dropped = [b for b in p.replicas if b not in merged]  # added by an earlier target, now unwanted
        if merged == p.replicas and adding == p.adding and removing == p.removing:
            return
        self._rebase(p)
        for b in dropped:
            self._remove_replica(p, b)
        for b in merged:
            if b not in p._reps:
                self._add_replica(p, b, cache)
        p.replicas = merged
        p.adding = adding
        p.removing = removing
        p.isr = [b for b in p.isr if b in merged]
        key = (p.topic, p.index)
        if p.in_flight:
            self._inflight[key] = p
        else:
            self._inflight.pop(key, None)
        if p.leader not in merged:
            self._change_leader(p, self._first_live_isr(p))
        self._touch(p)
        self._maybe_complete(p)

    def _maybe_complete(self, p: Partition) -> None:
        """Finish a reassignment once every target replica is in the ISR (controller behaviour)."""
        if not p.in_flight:
            return
        target = p.target_replicas()
        if not all(b in p.isr for b in target):
            return
        removed = list(p.removing)
        p.replicas = target
        p.adding = []
        p.removing = []
        p.isr = [b for b in p.isr if b in target]
        for b in removed:
            self._remove_replica(p, b)
        self._inflight.pop((p.topic, p.index), None)
        if p.leader not in target or not self.brokers[p.leader].alive:
            self._change_leader(p, self._first_live_isr(p, target))
        elif removed:
            p.leader_epoch += 1  # KRaft bumps the epoch when replicas leave so they stop fetching
        self._touch(p)

    def _cancel(self, p: Partition) -> None:
        """Revert to the original replicas; replicas being added are dropped with their data."""
        original = p.original_replicas()
        isr = [b for b in p.isr if b not in p.adding]
        if not isr:
            # Kafka's PartitionReassignmentRevert: keep the partition usable (unclean)
            isr = [original[0]]
        self._rebase(p)
        dropped = bool(p.adding)
        for b in list(p.adding):
            self._remove_replica(p, b)
        p.replicas = original
        p.adding = []
        p.removing = []
        p.isr = isr
        self._inflight.pop((p.topic, p.index), None)
        if p.leader not in original or p.leader < 0:
            self._change_leader(p, self._first_live_isr(p))
        elif dropped:
            p.leader_epoch += 1  # replicas left the assignment
        self._touch(p)

    # ------------------------------------------------------------ log dirs (KIP-113)
    @_locked
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
                r.future_log_dir = None  # moving back home cancels a running copy
                r.future_bytes = 0.0
            elif r.future_log_dir != path:
                r.future_log_dir = path
                r.future_bytes = 0.0
            self._touch(p)
            self.writes["AlterReplicaLogDirs"] += 1
            out.append((topic, index, E.NONE))
        self._flush_dirty()
        return out

    # ------------------------------------------------------------ topics
    def _live_brokers(self) -> list[tuple[int, str | None]]:
        return [(b.id, b.rack) for b in self.brokers.values() if b.alive]

    @_locked
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> tuple[int, str | None]:
        """CreateTopics for one topic (rack-aware placement when no assignment is given).

        :param name: topic name
        :param num_partitions: partitions, -1 for the broker default
        :param replication_factor: replicas per partition, -1 for the broker default
        :param assignments: partition -> replicas (then counts must be -1)
        :param configs: topic config overrides
        :param validate_only: check only, create nothing
        """
        self._run(self.now())
        if not name or len(name) > 249 or name in (".", "..") or not _LEGAL_TOPIC.fullmatch(name):
            return E.INVALID_TOPIC_EXCEPTION, (f"Topic name \"{name}\" is illegal, it contains a character other "
                                               "than ASCII alphanumerics, '.', '_' and '-'" if name else
                                               "Topic name is illegal, it can't be empty")
        if name in self.topics:
            return E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        try:
            cfg = validate_topic_configs(configs or {})
        except ConfigValueError as exc:
            return E.INVALID_CONFIG, str(exc)
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                return E.INVALID_REQUEST, ("Both numPartitions or replicationFactor and replicasAssignments "
                                           "were set. Both cannot be used at the same time.")
            parts = sorted(assignments)
            if parts != list(range(len(parts))):
                return E.INVALID_REPLICA_ASSIGNMENT, ("Partitions should be a consecutive 0-based integer "
                                                      "sequence")
            sizes = {len(assignments[i]) for i in parts}
            if len(sizes) != 1:
                return E.INVALID_REPLICA_ASSIGNMENT, ("All partitions in the manual partition assignment must "
                                                      "have the same number of replicas.")
            for i in parts:
                msg = self._validate_assignment([int(b) for b in assignments[i]])
                if msg is not None:
                    return E.INVALID_REPLICA_ASSIGNMENT, msg
            placement = {i: [int(b) for b in assignments[i]] for i in parts}
        else:
            n = num_partitions if num_partitions != -1 else int(self.configs.value(None, "num.partitions") or 1)
            rf = replication_factor if replication_factor != -1 else int(
                self.configs.value(None, "default.replication.factor") or 1)
            if n <= 0:
                return E.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            if rf <= 0:
                return E.INVALID_REPLICATION_FACTOR, ("Replication factor must be larger than 0, or -1 to use the "
                                                      "default value.")
            live = self._live_brokers()
            if rf > len(live):
                return E.INVALID_REPLICATION_FACTOR, (
                    f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                    f"cannot be reached because only {len(live)} broker(s) are registered.")
            placement = assign_replicas(live, n, rf, 0, self._rng)
        if validate_only:
            return E.NONE, None
        topic = Topic(name, uuid.uuid4(), name.startswith("__"), [], cfg)
        topic.refresh_throttles()
        self.topics[name] = topic
        self._add_partitions(topic, placement)
        self.writes["CreateTopics"] += 1
        self.state_version += 1
        return E.NONE, None

    def _add_partitions(self, topic: Topic, placement: dict[int, list[int]]) -> None:
        cache: dict[int, dict[str, float]] = {}
        for i in sorted(placement):
            replicas = placement[i]
            part = Partition(self, topic.name, i, replicas, replicas[0], 0.0, 0.0)
            for b in replicas:
                path = self._preferred_dirs.pop((b, topic.name, i), None) or self._pick_dir(b, 0.0, cache)
                part._reps[b] = Replica(part, b, path, True, 0.0, self._t)
                self._by_broker[b][part] = None
            # Kafka elects the first live replica; offline replicas stay out of the ISR
            part.isr = [b for b in replicas if self.brokers[b].alive] or [replicas[0]]
            part.leader = self._first_live_isr(part)
            for b in replicas:
                if b not in part.isr:
                    part._reps[b].tracking = False
            topic.partitions.append(part)
            self._touch(part)
        self._flush_dirty()

    @_locked
    def delete_topic(self, name: str) -> tuple[int, str | None]:
        """DeleteTopics for one topic.

        :param name: topic name
        """
        self._run(self.now())
        topic = self.topics.pop(name, None)
        if topic is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        for p in topic.partitions:
            for b in list(p._reps):
                self._by_broker[b].pop(p, None)
            self._inflight.pop((name, p.index), None)
            self._dirty.add(p)
        for key in [k for k in self._preferred_dirs if k[1] == name]:
            del self._preferred_dirs[key]
        self._flush_dirty()
        self.writes["DeleteTopics"] += 1
        self.state_version += 1
        return E.NONE, None

    @_locked
    def create_partitions(self, topic: str, count: int, assignments: list[list[int]] | None = None,
                          validate_only: bool = False) -> tuple[int, str | None]:
        """CreatePartitions: grow a topic to ``count`` partitions.

        :param topic: topic name
        :param count: the new total partition count
        :param assignments: replicas of each new partition (optional)
        :param validate_only: check only, create nothing
        """
        self._run(self.now())
        t = self.topics.get(topic)
        if t is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."
        current = len(t.partitions)
        if count < current:
            return E.INVALID_PARTITIONS, (f"Topic currently has {current} partitions, which is higher than the "
                                          f"requested {count}.")
        if count == current:
            return E.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        rf = len(t.partitions[0].target_replicas()) if t.partitions else 1
        if assignments:
            if len(assignments) != count - current:
                return E.INVALID_REPLICA_ASSIGNMENT, (
                    f"Increasing the number of partitions by {count - current} but {len(assignments)} "
                    "assignments provided.")
            for replicas in assignments:
                msg = self._validate_assignment([int(b) for b in replicas])
                if msg is not None:
                    return E.INVALID_REPLICA_ASSIGNMENT, msg
                if len(replicas) != rf:
                    return E.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes a partition "
                                                          f"with {len(replicas)} replica(s), but this is not "
                                                          f"consistent with previous partitions, which have {rf} "
                                                          "replica(s).")
            placement = {current + i: [int(b) for b in r] for i, r in enumerate(assignments)}
        else:
            live = self._live_brokers()
            if rf > len(live):
                return E.INVALID_REPLICATION_FACTOR, (f"Unable to replicate the partition {rf} time(s): only "
                                                      f"{len(live)} broker(s) are registered.")
            placement = assign_replicas(live, count - current, rf, current, self._rng)
        if validate_only:
            return E.NONE, None
        self._add_partitions(t, placement)
        self.writes["CreatePartitions"] += 1
        self.state_version += 1
        return E.NONE, None

    # ------------------------------------------------------------ elections
    @_locked
    def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, int, str | None]]:
        """ElectLeaders: 0 preferred, 1 unclean.

        :param election_type: 0 preferred, 1 unclean
        :param partitions: (topic, partition) list, None for every partition (then only
            partitions where an election happened or failed are reported)
        """
        self._run(self.now())
        report_all = partitions is not None
        if partitions is None:
            partitions = [(t.name, p.index) for t in self.topics.values() for p in t.partitions]
        out = []
        for topic, index in partitions:
            p = self._part(topic, index)
            if p is None:
                out.append((topic, index, E.UNKNOWN_TOPIC_OR_PARTITION,
                            "The partition does not exist."))
                continue
            if election_type == 0:
                preferred = p.replicas[0]
                if p.leader == preferred:
                    code, msg = E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
                elif preferred not in p.isr or not self.brokers[preferred].alive:
                    code, msg = E.PREFERRED_LEADER_NOT_AVAILABLE, (
                        f"Failed to elect leader for partition {topic}-{index} under strategy "
                        "PreferredReplicaPartitionLeaderElectionStrategy")
                else:
                    self._change_leader(p, preferred)
                    self.writes["ElectLeaders"] += 1
                    code, msg = E.NONE, None
            elif election_type == 1:
                if p.leader >= 0 and self.brokers[p.leader].alive:
                    code, msg = E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
                else:
                    live = [b for b in p.replicas if self.brokers[b].alive]
                    if not live:
                        code, msg = E.LEADER_NOT_AVAILABLE, (f"Failed to elect leader for partition {topic}-{index} "
                                                             "under strategy UncleanPartitionLeaderElectionStrategy")
                    else:
                        new = self._first_live_isr(p) if self._first_live_isr(p) >= 0 else live[0]
                        if new not in p.isr:
                            p.isr = [new]
                        self._change_leader(p, new)
                        self.writes["ElectLeaders"] += 1
                        code, msg = E.NONE, None
            else:
                code, msg = E.INVALID_REQUEST, f"Unknown election type {election_type}"
            if report_all or code != E.ELECTION_NOT_NEEDED:
                out.append((topic, index, code, msg))
        self._flush_dirty()
        return out

    # ------------------------------------------------------------ snapshot
    @_locked
    def snapshot(self) -> dict:
        """The current state in the snapshot format (DESIGN.md), plus isr per partition."""
        self._run(self.now())
        brokers = []
        for b in sorted(self.brokers.values(), key=lambda x: x.id):
            entry: dict[str, Any] = {"id": b.id, "rack": b.rack,
                                     "log_dirs": [{"path": d.path, "capacity_bytes": d.capacity_bytes}
                                                  for d in b.log_dirs]}
            if b.network_bytes_per_sec != DEFAULT_NETWORK_BYTES_PER_SEC:
                entry["network_bytes_per_sec"] = b.network_bytes_per_sec
            if b.disk_bytes_per_sec != DEFAULT_DISK_BYTES_PER_SEC:
                entry["disk_bytes_per_sec"] = b.disk_bytes_per_sec
            if self.configs.static.get(b.id):
                entry["configs"] = dict(self.configs.static[b.id])
            brokers.append(entry)
        topics = []
        for t in sorted(self.topics.values(), key=lambda x: x.name):
            parts = []
            for p in t.partitions:
                if p.leader >= 0:
                    size = p.log_bytes()
                else:
                    size = max((r.exact_bytes() for r in p._reps.values()), default=0.0)
                parts.append({"partition": p.index, "replicas": list(p.replicas), "leader": p.leader,
                              "isr": list(p.isr), "size_bytes": int(size),
                              "bytes_in_per_sec": p.bytes_in_per_sec,
                              "log_dirs": [p._reps[b].log_dir for b in p.replicas]})
            topics.append({"name": t.name, "configs": dict(t.configs), "partitions": parts})
        return {"version": 1, "cluster_id": self.cluster_id, "brokers": brokers, "topics": topics}
