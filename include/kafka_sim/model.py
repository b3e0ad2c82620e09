"""The simulated Kafka cluster's model: state plus physics in simulated time (no sockets).

``ClusterModel`` is assembled from mixins, one module per thing it models:

- :mod:`kafka_sim.state` - brokers, topics, partitions, replicas (lazily grown logs);
- :mod:`kafka_sim.replication` - followers fetching, the ISR, leadership, with the KIP-73
  quotas of :mod:`kafka_sim.quotas` and max-min fair sharing of :mod:`kafka_sim.fairshare`;
- :mod:`kafka_sim.reassignment` - KIP-455 as KRaft's ReplicationControlManager runs it;
- :mod:`kafka_sim.config_requests` - Describe/Alter configs over :mod:`kafka_sim.configs`;
- :mod:`kafka_sim.logs` - log dirs (KIP-113), produce and fetch of record batches;
- :mod:`kafka_sim.topics`, :mod:`kafka_sim.leadership`, :mod:`kafka_sim.placement`.

Scale: a cluster of 100 brokers and 100k partitions must tick every 10 ms, so nothing
loops over every partition per tick: only partitions with a follower catching up, a
future replica copying or a congested broker are visited by the physics.

Every public method takes ``self.lock`` (the wire server calls from its event loop, tests
from other threads). Kafka-level errors come back as ``(code, message)``, never raised.
"""
from __future__ import annotations

import base64
import gc
import random
import threading
import time
import uuid
from collections import Counter, deque
from typing import Any, Callable

from kafka_sim.config_requests import ConfigRequests
from kafka_sim.config_resolution import BrokerConfigState, validate_topic_configs
from kafka_sim.config_types import ConfigEntry, ConfigValueError, normalize
from kafka_sim.cordons import Cordons
from kafka_sim.configs import BROKER_CONFIGS
from kafka_sim.leadership import Leadership
from kafka_sim.model_base import OrderedSet, locked
from kafka_sim.logs import Logs
from kafka_sim.reassignment import Reassignment
from kafka_sim.replication import Replication
from kafka_sim.replication_quotas import FOLLOWER_QUOTA
from kafka_sim.state import (
    DEFAULT_DISK_BYTES_PER_SEC,
    DEFAULT_LOG_DIR,
    DEFAULT_LOG_DIR_CAPACITY,
    DEFAULT_NETWORK_BYTES_PER_SEC,
    Broker,
    LogDir,
    Partition,
    Replica,
    Topic,
)
from kafka_sim.topics import Topics

__all__ = ["Broker", "ClusterModel", "LogDir", "Partition", "Replica", "Topic", "ConfigEntry"]


class ClusterModel(Replication, Reassignment, ConfigRequests, Logs, Topics, Leadership, Cordons):
    """Brokers, topics, replicas, configs and replication physics in simulated time.

    :param snapshot: a snapshot dict (docs/FORMATS.md; see ``from_snapshot`` notes)
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
        self._init_physics()
        self._dir_logs: dict[int, dict[str, int]] = {}  # logs per log dir of each broker
        self._dir_usage: dict[int, Any] = {}  # DirUsage per broker, dropped when its replicas change
        self._imbalanced: OrderedSet[Partition] = OrderedSet()  # led by a replica other than the first
        self._balance_at: float | None = None  # next automatic preferred-leader election
        self._steady_out: dict[int, float] = {}
        self._steady_in: dict[int, float] = {}
        # records produced through the API over the last PRODUCE_WINDOW_S: (time, bytes) and their sum
        self._produced: dict[Partition, tuple[deque[tuple[float, float]], list[float]]] = {}
        self._rate_bound: dict[int, float] = {}  # at least the fastest in-sync write rate via each broker
        self._inflight: dict[tuple[str, int], Partition] = {}
        self._preferred_dirs: dict[tuple[int, str, int], str] = {}
        self._rates: dict[int, tuple[float, float, float]] = {}
        self._plan: Any = None  # Replication's cached rates and next event
        self._link_rates: Any = None  # (plan, link -> its flows' rates), see _plan_link_rates
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
                if p.get("batch_bytes"):
                    part.batch_bytes = int(p["batch_bytes"])
                part.remote_bytes = float(p.get("remote_bytes", 0) or 0)
                topic.partitions.append(part)
            self.topics[name] = topic
        for topic in self.topics.values():
            for part in topic.partitions:
                self._dirty.add(part)
                self._note_preferred_leader(part)
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
            self._place(part, b, path, True)
        part._rate = bytes_in if self.brokers[leader].alive else 0.0
        return part

    # ------------------------------------------------------------ time
    def now(self) -> float:
        """Simulated seconds since the model started."""
        if self.time_scale > 0:
            return (self._clock() - self._start) * self.time_scale + self._offset
        return self._offset

    @locked
    def advance(self) -> None:
        """Run the physics up to ``now()`` (the server calls this every ~10 ms)."""
        self._run(self.now())

    @locked
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


    # ------------------------------------------------------------ lookup helpers
    def _part(self, topic: str, partition: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition]

    @locked
    def partition(self, topic: str, partition: int) -> Partition | None:
        """The partition object, or None.

        :param topic: topic name
        :param partition: partition index
        """
        return self._part(topic, partition)


    @property
    def metadata_version(self) -> int:
        """Changes whenever anything a Metadata response shows may have changed."""
        return self.state_version

    @property
    def controller_id(self) -> int:
        """A random live broker, chosen per call, as KRaftMetadataCache.getControllerId reports it
        (clients send controller-bound requests to any broker, KIP-590); -1 if none is alive."""
        live = [b for b, br in self.brokers.items() if br.alive]
        return random.choice(live) if live else -1

    @property
    def write_count(self) -> int:
        """Accepted write items so far (configs, reassignments, topics, log-dir moves, elections)."""
        return sum(self.writes.values())

    # ------------------------------------------------------------ faults
    @locked
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
            hw = self._hw_bytes(p)
            if broker_id in p.isr and len(p.isr) > 1:
                p.isr.remove(broker_id)
            if p.leader == broker_id:
                self._change_leader(p, self._first_live_isr(p))
            else:  # a follower fenced: the leader's watermark stops under min ISR (a new leader's is its own)
                self._freeze_under_min_isr(p, hw)
            self._rebase(p)
            self._touch(p)
        self._refresh_rates()
        self.state_version += 1
        self._flush_dirty()

    @locked
    def start_broker(self, broker_id: int) -> None:
        """Restart a broker: its replicas catch up and rejoin the ISR; leaderless partitions recover.

        :param broker_id: the broker
        """
        self._run(self.now())
        broker = self.brokers[broker_id]
        if broker.alive:
            return
        broker.alive = True
        # a new JVM's follower quota sensor: fresh, one sample wide (SimpleRate.windowSize), not
        # the dead one's, which (stopped for about a window) counted as a full idle window
        self._meters.pop((FOLLOWER_QUOTA, broker_id), None)
        self._last_kept = None  # its quota events were found for the meter just dropped
        for p in list(self._by_broker[broker_id]):
            if p.leader < 0:
                self._change_leader(p, self._first_live_isr(p))
            self._rebase(p)
            self._touch(p)
        self.state_version += 1
        self._flush_dirty()

    @locked
    def set_write_rate(self, topic: str, partition: int, bytes_per_sec: float) -> None:
        """Change how fast producers write to a partition (a traffic spike or lull).

        :param topic: topic name
        :param partition: partition index
        :param bytes_per_sec: the new write rate
        """
        self._run(self.now())
        p = self._part(topic, partition)
        if p is None:
            raise KeyError(f"{topic}-{partition}")
        if bytes_per_sec < 0:
            raise ValueError("a write rate cannot be negative")
        self._rebase(p)
        p.bytes_in_per_sec = float(bytes_per_sec)
        self._dirty.add(p)
        self._flush_dirty()

    @locked
    def set_network(self, broker_id: int, bytes_per_sec: float) -> None:
        """Change a broker's network capacity (each direction), e.g. a degraded link.

        :param broker_id: the broker
        :param bytes_per_sec: the new capacity
        """
        self._run(self.now())
        if bytes_per_sec <= 0:
            raise ValueError("network capacity must be positive")
        self.brokers[broker_id].network_bytes_per_sec = float(bytes_per_sec)
        self._plan = None
        self._relieve_congestion({broker_id})
        self._flush_dirty()

    # ------------------------------------------------------------ read side
    @locked
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


    # ------------------------------------------------------------ snapshot
    @locked
    def snapshot(self) -> dict:
        """The current state in the snapshot format (docs/FORMATS.md), plus isr per partition."""
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
                              "log_dirs": [p._reps[b].log_dir for b in p.replicas],
                              **({"remote_bytes": int(p.remote_bytes)} if p.remote_bytes else {})})
            topics.append({"name": t.name, "configs": dict(t.configs), "partitions": parts})
        return {"version": 1, "cluster_id": self.cluster_id, "brokers": brokers, "topics": topics}

