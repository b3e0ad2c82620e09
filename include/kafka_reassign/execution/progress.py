"""What a run's progress looks like to every reader: UI, CLI, DAG logs, demo, metrics.

:meth:`kafka_reassign.execution.executor.MoveExecutor.progress` builds a :class:`ProgressView` after
each poll; the executor saves it next to its state, so the UI progress page and
``kafka-reassign status`` read the same numbers the run acted on.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from kafka_reassign.units import fmt_bytes, format_duration

#: Per-step rows kept in a view: the steps in flight and the dead ones are always shown;
#: this many recently finished ones besides.
RECENT_DONE_ROWS = 20


@dataclass
class StepRow:
    """One step in the view.

    :param name: "topic-partition"
    :param step: "i/n" among the partition's steps
    :param status: queued, in_flight, done or an outcome of a dead step (stalled, failed, timed_out)
    :param message: the outcome's message (why it is waiting, why it failed)
    """

    name: str
    step: str
    status: str
    current: list[int]
    target: list[int]
    bytes_total: int = 0
    bytes_left: int = 0
    submitted_at: float | None = None
    message: str = ""


_ROW_FIELDS = tuple(f.name for f in fields(StepRow))


@dataclass
class ProgressView:
    """A run's progress at one poll.

    :param outcome: the run's :class:`~kafka_reassign.execution.outcome.Outcome` value
    :param bytes_total: bytes the whole plan copies
    :param bytes_moved: bytes copied so far (finished steps and the in-flight ones' progress)
    :param rate_bytes_per_sec: copy rate over the last polls (None until two polls)
    :param eta_seconds: bytes left / rate (None when unknown)
    :param rows: steps in flight, dead steps and the most recently finished ones
    :param partition_cap: steps allowed in flight in the cluster now (adaptive concurrency may
        have lowered it below ``max_partition_movements``)
    :param broker_cap: steps allowed in flight on a broker in good health
    :param reduced_broker_caps: broker id (as a string, JSON's keys) -> its lowered cap
    :param cap_change: the last change of the caps, with its reason ("" = none yet)
    :param checks: cheap ListPartitionReassignments checks between polls
    :param leader_changes: preferred leader elections the run made (lead steps of leader-aware
        sourcing, and the plan's preferred leaders at the end)
    :param held: why no new step starts now ("paused ...", "waiting for the window opening at
        ..."; "" = new steps start as they fit)
    :param reopens_at: the maintenance window opening the run waits for (None: not waiting for one)
    :param broker_throttles: broker id (as a string) -> its rate now, for the brokers whose rate the
        adaptive throttle changed from ``throttle_bytes_per_sec``
    :param throttle_change: the adaptive throttle's last changes, each with its reason ("" = none)
    """

    run_id: str = ""
    outcome: str = "in_progress"
    message: str = ""
    steps_total: int = 0
    steps_done: int = 0
    steps_in_flight: int = 0
    steps_queued: int = 0
    steps_dead: int = 0
    partitions_total: int = 0
    partitions_done: int = 0
    bytes_total: int = 0
    bytes_moved: int = 0
    bytes_left: int = 0
    rate_bytes_per_sec: float | None = None
    eta_seconds: float | None = None
    started_at: float | None = None
    first_submit_at: float | None = None
    updated_at: float = 0.0
    polls: int = 0
    checks: int = 0
    leader_changes: int = 0
    throttle_bytes_per_sec: int | None = None
    partition_cap: int | None = None
    broker_cap: int | None = None
    reduced_broker_caps: dict[str, int] = field(default_factory=dict)
    cap_change: str = ""
    held: str = ""
    reopens_at: float | None = None
    broker_throttles: dict[str, int] = field(default_factory=dict)
    throttle_change: str = ""
    rows: list[StepRow] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.outcome != "in_progress"

    def summary(self) -> str:
        """One line: steps done / in flight / queued, bytes, rate, ETA."""
        rate = f"{fmt_bytes(self.rate_bytes_per_sec)}/s" if self.rate_bytes_per_sec is not None else "n/a"
        eta = format_duration(self.eta_seconds) if self.eta_seconds is not None else "unknown"
        s = (f"{self.steps_done}/{self.steps_total} steps done, {self.steps_in_flight} in flight, "
             f"{self.steps_queued} queued; moved {fmt_bytes(self.bytes_moved)} of {fmt_bytes(self.bytes_total)}, "
             f"{fmt_bytes(self.bytes_left)} left, rate {rate}, ETA {eta}")
        if self.leader_changes:
            s += f"; {self.leader_changes} leader change(s)"
        if self.steps_dead:
            s += f"; {self.steps_dead} step(s) {self.outcome.upper()}: {self.message}"
        if self.cap_change:
            s += f"; {self.caps_line()}"
        if self.throttle_change:
            s += f"; {self.throttle_line()}"
        if self.held and not self.finished:
            s += f"; {self.held}"
        return s

    def caps_line(self) -> str:
        """The caps now and their last change: "caps 1250 in cluster, 20 per broker (3: 10); last: …"."""
        reduced = ", ".join(f"{b}: {c}" for b, c in sorted(self.reduced_broker_caps.items(), key=lambda x: int(x[0])))
        line = f"caps {self.partition_cap} in cluster, {self.broker_cap} per broker"
        return line + (f" ({reduced})" if reduced else "") + f"; last change: {self.cap_change}"

    def throttle_line(self) -> str:
        """The adaptive throttle's rates now and its last change: "throttle 3: 20.0 MB/s; last change: …"."""
        rates = ", ".join(f"{b}: {fmt_bytes(r)}/s" for b, r in sorted(self.broker_throttles.items(),
                                                                       key=lambda x: int(x[0])))
        return f"throttle {rates or 'as set'}; last change: {self.throttle_change}"

    def format_table(self) -> str:
        """The steps in flight (and dead ones) as a table, then the summary line."""
        headers = ("Partition", "Step", "Status", "Replicas", "Left")
        rows = [(r.name, r.step, r.status, f"{r.current} -> {r.target}", fmt_bytes(r.bytes_left))
                for r in self.rows if r.status != "done"]
        widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
        out = [line(headers), "-" * (sum(widths) + 2 * (len(widths) - 1))] if rows else []
        out += [line(r) for r in rows]
        out.append(self.summary())
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        # Saved after every poll: plain field copies (dataclasses.asdict deep-copies, slowly).
        d = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "rows"}
        d["rows"] = [{f: getattr(r, f) for f in _ROW_FIELDS} for r in self.rows]
        return d

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | str) -> "ProgressView":
        d: dict[str, Any] = dict(json.loads(raw) if isinstance(raw, str) else raw)
        rows = [StepRow(**r) for r in d.pop("rows", [])]
        known = set(cls.__dataclass_fields__)
        return cls(rows=rows, **{k: v for k, v in d.items() if k in known})
