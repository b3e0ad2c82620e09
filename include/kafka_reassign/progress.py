"""Progress of a batch: per (topic, partition, broker) status, bytes left, rate, ETA, stalls.

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
from collections import deque
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


class StallDetector:
    """Detects replication lag that stopped falling over a time window.

    Feed it ``(time, bytes_left)`` at each poll; :meth:`check` returns a message saying
    what to change when, over the last ``window_seconds``, bytes left did not fall.

    :param window_seconds: how long lag may stay flat before it counts as stalled
    :param min_progress_bytes: less progress than this over the window counts as none
    """

    def __init__(self, window_seconds: float, min_progress_bytes: int = 1) -> None:
        if window_seconds <= 0:
            raise ValueError("window_seconds must be > 0")
        self.window_seconds = float(window_seconds)
        self.min_progress_bytes = int(min_progress_bytes)
        self.samples: deque[tuple[float, int]] = deque()

    def observe(self, t: float, bytes_left: int) -> None:
        self.samples.append((float(t), int(bytes_left)))
        # Keep exactly one sample at or before the window start as the reference point.
        while len(self.samples) >= 2 and self.samples[1][0] <= t - self.window_seconds:
            self.samples.popleft()

    def stalled(self) -> bool:
        if len(self.samples) < 2:
            return False
        t0, left0 = self.samples[0]
        t1, left1 = self.samples[-1]
        if t1 - t0 < self.window_seconds or left1 == 0:
            return False
        return left0 - left1 < self.min_progress_bytes

    def check(self, progress: BatchProgress | None = None, state: ClusterState | None = None,
              throttle_rate: int | None = None) -> str | None:
        """None while making progress; otherwise a message that says what to change.

        :param progress: the latest poll (to name partitions and brokers)
        :param state: for produce rates and dead brokers
        :param throttle_rate: the replication throttle in force (bytes/s)
        """
        if not self.stalled():
            return None
        left = self.samples[-1][1]
        head = (f"replication lag has not fallen for {self.window_seconds:.0f} s "
                f"({fmt_bytes(left)} still to copy)")
        return head + ": " + diagnose_stall(progress, state, throttle_rate)

    def to_json(self) -> dict[str, Any]:
        return {"window_seconds": self.window_seconds, "min_progress_bytes": self.min_progress_bytes,
                "samples": [list(s) for s in self.samples]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "StallDetector":
        sd = cls(d["window_seconds"], d.get("min_progress_bytes", 1))
        for t, left in d.get("samples", []):
            sd.samples.append((float(t), int(left)))
        return sd


def diagnose_stall(progress: BatchProgress | None, state: ClusterState | None,
                   throttle_rate: int | None) -> str:
    """Say why a batch is not progressing and what to change."""
    if progress is None:
        return "check the receiving brokers and raise throttle_bytes_per_sec"
    lagging = [r for r in progress.rows if r.status in (BEHIND, CATCHING_UP, OFFLINE, UNKNOWN)
               and r.role in ("adding", "log-dir", "staying")]
    offline = sorted({r.broker for r in lagging if r.status == OFFLINE})
    if offline:
        parts = ", ".join(sorted({f"{r.topic}-{r.partition}" for r in lagging if r.status == OFFLINE}))
        return (f"broker {', '.join(map(str, offline))} is offline ({parts} cannot catch up there): "
                "start it again, or cancel the move (cancel_on_failure) and plan without it")
    if throttle_rate:
        per_broker: dict[int, list[tuple[str, float]]] = {}
        for r in lagging:
            name = f"{r.topic}-{r.partition}"
            rate = progress.produce_rates.get(name, 0.0)
            p = state.partition(r.topic, r.partition) if state is not None else None
            if p is not None and p.bytes_in_per_sec > rate:
                rate = p.bytes_in_per_sec
            if rate > 0:
                per_broker.setdefault(r.broker, []).append((name, rate))
        worst = None
        for b, items in per_broker.items():
            total = sum(x for _, x in items)
            if worst is None or total > worst[1]:
                worst = (b, total, items)
        if worst is not None and worst[1] >= 0.8 * throttle_rate:
            b, total, items = worst
            names = ", ".join(n for n, _ in sorted(items, key=lambda x: -x[1])[:3])
            return (f"throttle {fmt_bytes(throttle_rate)}/s is below the produce rate {fmt_bytes(total)}/s "
                    f"of {names} on broker {b}: raise throttle_bytes_per_sec above {fmt_bytes(total)}/s "
                    f"(e.g. {int(total * 2)}) or move fewer partitions per batch")
    brokers = sorted({r.broker for r in lagging})
    hint = f" on broker {', '.join(map(str, brokers))}" if brokers else ""
    rate = f" (now {fmt_bytes(throttle_rate)}/s)" if throttle_rate else ""
    return (f"replicas{hint} are not catching up: raise throttle_bytes_per_sec{rate}, check those "
            "brokers' disks and network, or lower max_movements_per_broker")
