"""State objects of the simulated cluster: brokers, log dirs, topics, partitions, replicas.

A partition's log grows lazily (``base_bytes + rate * (t - base_t)``) and a caught-up
("tracking") replica has no byte count of its own but follows the leader's log, so a
cluster of 100k partitions costs nothing per tick for partitions nobody touches.
"""
from __future__ import annotations

import bisect
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from kafka_sim.config_types import parse_throttled_replicas
from kafka_sim.model_base import CATCH_UP_EPS

DEFAULT_NETWORK_BYTES_PER_SEC = 125_000_000.0
DEFAULT_DISK_BYTES_PER_SEC = 500_000_000.0
DEFAULT_LOG_DIR = "/var/lib/kafka/data"
DEFAULT_LOG_DIR_CAPACITY = 1e12

#: Shared empty record list of a partition nobody produced to (replaced on the first produce).
NO_RECORDS: tuple = ()


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


class ModelCore(Protocol):
    """What a partition reads from its model: physics time and brokers (the model imports
    this module, so this module names the model only by this protocol)."""

    _t: float
    brokers: dict[int, Broker]


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


#: Bytes per offset of a tiered partition's snapshot data (see Partition.tiered_offsets).
TIERED_RECORD_BYTES = 1024

#: ProducerConfig batch.size default: the batch size assumed for a snapshot's data
DEFAULT_BATCH_BYTES = 16384


class Partition:
    """One partition: assignment, ISR, leader and the leader's log.

    The log is a byte count growing at ``bytes_in_per_sec`` while a leader is up, plus the
    record batches produced to it (each remembering the byte position where it ends, so a
    follower holding N bytes holds exactly the batches that end within N).
    """

    __slots__ = ("topic", "index", "replicas", "isr", "leader", "leader_epoch", "partition_epoch", "adding",
                 "removing", "bytes_in_per_sec", "_reps", "_base_bytes", "_base_t", "_rate", "_model", "leo",
                 "_rec_base", "_rec_end", "_rec_pos", "_rec_data", "_rec_maxts", "batch_bytes", "remote_bytes",
                 "frozen_hw")

    def __init__(self, model: ModelCore, topic: str, index: int, replicas: list[int], leader: int,
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
        #: record batch size of the snapshot's data (producer batch.size default): what a
        #: follower's fetch of replica.fetch.max.bytes wastes on a trailing partial batch
        self.batch_bytes = DEFAULT_BATCH_BYTES
        #: bytes of a tiered topic's partition in remote storage only (KIP-405): below the local
        #: log, never copied by a reassignment, not counted by DescribeLogDirs
        self.remote_bytes = 0.0
        #: bytes where the high watermark stopped while the ISR is under min ISR (None: it moves)
        self.frozen_hw: float | None = None
        # record batches, created on the first produce (most partitions never get any)
        self._rec_base: list[int] = NO_RECORDS  # type: ignore[assignment]
        self._rec_end: list[int] = NO_RECORDS  # type: ignore[assignment]
        self._rec_pos: list[float] = NO_RECORDS  # type: ignore[assignment]
        self._rec_data: list[bytes] = NO_RECORDS  # type: ignore[assignment]
        self._rec_maxts: list[int] = NO_RECORDS  # type: ignore[assignment]

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
        i = bisect.bisect_right(self._rec_pos, nbytes + CATCH_UP_EPS)
        return self._rec_end[i - 1] if i else 0

    def tiered_offsets(self) -> tuple[int, int, int]:
        """(log start, earliest local, log end) offsets of a tiered partition (ListOffsets -2, -4, -1).

        A snapshot's data has no records here, so a tiered partition's offsets count its bytes,
        one offset per :data:`TIERED_RECORD_BYTES`: the remote part first, then the local log
        (records produced to it count on top). Bytes per offset are then the same in both parts,
        as an estimate from these three offsets assumes.
        """
        local_start = round(self.remote_bytes / TIERED_RECORD_BYTES)
        return 0, local_start, local_start + round(self.log_bytes() / TIERED_RECORD_BYTES) + self.leo

    def high_watermark(self) -> int:
        """Min log end offset over the ISR."""
        if not self.isr:
            return 0
        hw = min(self._reps[b].log_end_offset for b in self.isr if b in self._reps)
        return hw if self.frozen_hw is None else min(hw, self.offset_at(self.frozen_hw))

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
    version: int = 0  # bumped when any partition's metadata changes

    def refresh_throttles(self) -> None:
        """Re-parse the KIP-73 throttled-replica lists after a config change."""
        self.leader_throttled = parse_throttled_replicas(self.configs.get("leader.replication.throttled.replicas"))
        self.follower_throttled = parse_throttled_replicas(
            self.configs.get("follower.replication.throttled.replicas"))


def is_throttled(spec: bool | frozenset[tuple[int, int]] | None, partition: int, broker: int) -> bool:
    """Whether a KIP-73 throttled-replica list covers ``broker``'s replica of ``partition``."""
    if spec is None:
        return False
    if spec is True:
        return True
    return (partition, broker) in spec  # type: ignore[operator]

