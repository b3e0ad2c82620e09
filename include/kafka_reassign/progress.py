"""Per-replica progress of a set of moves (``kafka-reassign status``): status, bytes left, rate, ETA.

A run's own progress, outcome and stall decisions are the executor's
(:mod:`kafka_reassign.progress_view`, :mod:`kafka_reassign.outcome`); this is the KIP-179 table.

Statuses follow KIP-179's ``--progress`` table: ``In sync``, ``Behind N bytes``,
``Catching up`` (a future replica moving between log dirs, KIP-113 offset lag), ``Offline``
(the broker is down), ``Unknown`` (no data about the replica), plus ``Leaving`` /
``Removed`` for replicas the step takes away.

Bytes behind come from DescribeLogDirs: the leader's log size minus the replica's size (a
new replica that has not been created yet is behind by the whole leader size).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from kafka_reassign.state import ClusterState, InFlight, ReplicaLogDir, TopicPartition
from kafka_reassign.steps import Batch, StepMove
from kafka_reassign.throttle import fmt_bytes

IN_SYNC = "In sync"
BEHIND = "Behind"
CATCHING_UP = "Catching up"
OFFLINE = "Offline"
UNKNOWN = "Unknown"
LEAVING = "Leaving"
REMOVED = "Removed"


@dataclass
class ReplicaProgress:
    """One row: a replica of a partition in the batch.

    :param role: "adding", "removing", "staying" or "log-dir"
    :param bytes_behind: bytes still to copy for this replica (0 when in sync or leaving)
    :param offset_lag: KIP-113 offset lag of a future replica, else None
    """

    topic: str
    partition: int
    broker: int
    role: str
    status: str
    bytes_behind: int = 0
    bytes_total: int = 0
    offset_lag: int | None = None
    in_isr: bool = False
    under_min_isr: bool = False

    @property
    def status_text(self) -> str:
        if self.status == BEHIND:
            return f"Behind {self.bytes_behind} bytes ({fmt_bytes(self.bytes_behind)})"
        if self.status == CATCHING_UP and self.offset_lag is not None:
            return f"Catching up (log dir, offset lag {self.offset_lag})"
        return self.status


@dataclass
class BatchProgress:
    """Where a batch stands at one poll.

    :param rows: one per (topic, partition, broker)
    :param done_partitions: "topic-partition" of steps finished
    :param pending_partitions: steps not finished yet
    :param bytes_total: bytes the batch has to copy (grows with produce)
    :param bytes_left: bytes still to copy
    :param rate_bytes_per_sec: copy rate since the previous poll (None on the first poll)
    :param eta_seconds: bytes_left / rate (None when unknown)
    :param time: time of the poll (seconds; monotonic or simulated, only differences matter)
    """

    batch_index: int
    rows: list[ReplicaProgress] = field(default_factory=list)
    done_partitions: list[str] = field(default_factory=list)
    pending_partitions: list[str] = field(default_factory=list)
    under_min_isr: list[str] = field(default_factory=list)
    bytes_total: int = 0
    bytes_left: int = 0
    rate_bytes_per_sec: float | None = None
    eta_seconds: float | None = None
    time: float = 0.0
    leader_sizes: dict[str, int] = field(default_factory=dict)
    produce_rates: dict[str, float] = field(default_factory=dict)
    first_time: float | None = None
    first_leader_sizes: dict[str, int] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return not self.pending_partitions

    @property
    def bytes_moved(self) -> int:
        return max(0, self.bytes_total - self.bytes_left)

    # -- construction ----------------------------------------------------------------
    @classmethod
    def build(cls, batch: Batch, in_flight: Mapping[TopicPartition, InFlight], state: ClusterState,
              log_dirs: Iterable[ReplicaLogDir], previous: "BatchProgress | None" = None,
              now: float | None = None) -> "BatchProgress":
        """Compute the progress of ``batch``.

        :param batch: the batch being executed
        :param in_flight: ListPartitionReassignments now
        :param state: cluster state now (replicas, ISR, leaders, alive brokers)
        :param log_dirs: DescribeLogDirs rows for the batch's partitions
        :param previous: the previous poll, for the rate and ETA
        :param now: time of this poll (default: time.monotonic())
        """
        now = time.monotonic() if now is None else now
        sizes: dict[tuple[str, int, int], ReplicaLogDir] = {}
        futures: dict[tuple[str, int, int], ReplicaLogDir] = {}
        for r in log_dirs:
            (futures if r.is_future else sizes)[(r.topic, r.partition, r.broker)] = r
        prog = cls(batch_index=batch.index, time=now)
        for step in batch.steps:
            prog._add_step(step, in_flight, state, sizes, futures)
        if previous is not None and now > previous.time:
            moved_delta = prog.bytes_moved - previous.bytes_moved
            # Produce traffic grows the total; count progress as the fall in bytes left when
            # it is larger (both are honest measures of copying).
            left_delta = previous.bytes_left - prog.bytes_left
            prog.rate_bytes_per_sec = max(0.0, max(moved_delta, left_delta) / (now - previous.time))
            if prog.rate_bytes_per_sec > 0:
                prog.eta_seconds = prog.bytes_left / prog.rate_bytes_per_sec

        # The leader's log growth is the produce rate, what KIP-73 says the throttle must beat;
        # averaged since the batch's first poll so one late sample does not skew it.
        if previous is not None:
            prog.first_time = previous.first_time if previous.first_time is not None else previous.time
            prog.first_leader_sizes = previous.first_leader_sizes or dict(previous.leader_sizes)
            span = now - prog.first_time
            if span > 0:
                for name, size in prog.leader_sizes.items():
                    if name in prog.first_leader_sizes:
                        prog.produce_rates[name] = max(0.0, (size - prog.first_leader_sizes[name]) / span)
        if prog.bytes_left == 0:
            prog.eta_seconds = 0.0 if prog.done else prog.eta_seconds
        return prog

    def _add_step(self, step: StepMove, in_flight: Mapping[TopicPartition, InFlight], state: ClusterState,
                  sizes: dict, futures: dict) -> None:
        p = state.partition(step.topic, step.partition)
        if p is None:
            self.rows.append(ReplicaProgress(step.topic, step.partition, -1, "staying", "Unknown partition"))
            self.pending_partitions.append(step.name)
            return
        min_isr = state.min_isr(step.topic)
        under = len(p.isr) < min_isr
        if under:
            self.under_min_isr.append(step.name)
        leader_row = sizes.get((step.topic, step.partition, p.leader))
        leader_size = leader_row.size if leader_row is not None else p.size_bytes
        self.leader_sizes[step.name] = leader_size
        wanted_dirs = step.wanted_dirs() if step.is_log_dir_only else {}
        has_future = any(k[0] == step.topic and k[1] == step.partition for k in futures)
        dirs_ok = all((sizes.get((step.topic, step.partition, b)) is not None
                       and sizes[(step.topic, step.partition, b)].path == d)
                      for b, d in wanted_dirs.items())
        finished = (step.key not in in_flight and tuple(p.replicas) == tuple(step.target)
                    and all(b in p.isr for b in step.target if state.brokers.get(b) is None
                            or state.brokers[b].alive)
                    and (not step.is_log_dir_only or (dirs_ok and not has_future)))
        (self.done_partitions if finished else self.pending_partitions).append(step.name)
        brokers = list(step.target) + [b for b in step.current if b not in step.target]
        for b in brokers:
            role = ("log-dir" if b in wanted_dirs else "staying") if step.is_log_dir_only else (
                "adding" if b in step.adding else "removing" if b in step.removing else "staying")
            row = ReplicaProgress(step.topic, step.partition, b, role, UNKNOWN, in_isr=b in p.isr,
                                  under_min_isr=under)
            info = state.brokers.get(b)
            own = sizes.get((step.topic, step.partition, b))
            fut = futures.get((step.topic, step.partition, b))
            if role == "removing":
                row.status = REMOVED if b not in p.replicas else (LEAVING if info is None or info.alive else OFFLINE)
            elif info is not None and not info.alive:
                row.status = OFFLINE
                if role == "adding":
                    row.bytes_total = leader_size
                    row.bytes_behind = max(0, leader_size - (own.size if own else 0))
            elif role == "log-dir":
                base = own.size if own is not None else leader_size
                row.bytes_total = base
                if fut is not None:
                    row.status = CATCHING_UP
                    row.offset_lag = fut.offset_lag
                    row.bytes_behind = max(0, base - fut.size)
                elif own is not None and own.path == wanted_dirs[b]:
                    row.status = IN_SYNC
                else:
                    # The AlterReplicaLogDirs has not created the future replica yet.
                    row.status = BEHIND
                    row.bytes_behind = base
            elif b in p.isr:
                row.status = IN_SYNC
                if role == "adding":
                    row.bytes_total = leader_size
            else:
                have = own.size if own is not None else 0
                if leader_row is None and p.size_bytes == 0 and own is None:
                    row.status = UNKNOWN
                else:
                    row.status = BEHIND
                    row.bytes_behind = max(0, leader_size - have)
                if role == "adding":
                    row.bytes_total = leader_size
            self.bytes_total += row.bytes_total
            self.bytes_left += row.bytes_behind
            self.rows.append(row)

    # -- output ----------------------------------------------------------------------
    def summary(self) -> str:
        """One line: moved / total, left, rate, ETA, partitions done."""
        n_done, n_all = len(self.done_partitions), len(self.done_partitions) + len(self.pending_partitions)
        rate = f"{fmt_bytes(self.rate_bytes_per_sec)}/s" if self.rate_bytes_per_sec is not None else "n/a"
        if self.eta_seconds is None:
            eta = "unknown"
        else:
            eta = f"{self.eta_seconds:.0f} s"
        s = (f"batch {self.batch_index}: {n_done}/{n_all} partitions done, moved "
             f"{fmt_bytes(self.bytes_moved)} of {fmt_bytes(self.bytes_total)}, "
             f"{fmt_bytes(self.bytes_left)} left, rate {rate}, ETA {eta}")
        if self.under_min_isr:
            s += f"; UNDER MIN ISR: {', '.join(self.under_min_isr)}"
        return s

    def format_table(self) -> str:
        """KIP-179-style table readable at a glance, followed by the summary line."""
        headers = ("Topic", "Partition", "Broker", "Role", "Status")
        rows = [(r.topic, str(r.partition), str(r.broker), r.role,
                 r.status_text + (" (under min ISR)" if r.under_min_isr and r.role != "removing" else ""))
                for r in self.rows]
        widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
        out = [line(headers), "-" * (sum(widths) + 2 * (len(widths) - 1))]
        out += [line(r) for r in rows]
        out.append(self.summary())
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["done"] = self.done
        d["bytes_moved"] = self.bytes_moved
        for row, r in zip(d["rows"], self.rows):
            row["status_text"] = r.status_text
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | str) -> "BatchProgress":
        if isinstance(d, str):
            d = json.loads(d)
        d = dict(d)
        rows = [ReplicaProgress(**{k: v for k, v in r.items() if k != "status_text"}) for r in d.pop("rows", [])]
        d.pop("done", None)
        d.pop("bytes_moved", None)
        return cls(rows=rows, **d)
