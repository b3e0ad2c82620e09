"""The one place that decides how a KIP-435 step, and a whole run, stands.

Every reader of progress goes through here: the executor's loop (CLI and DAG), the
trigger that waits in the triggerer, the report task and the UI. A step is

* ``DONE``: no reassignment in flight for it, its replicas are the step's target and every
  live target replica is in the ISR (and, for a log-dir step, each replica sits in its wanted
  dir with no future replica left);
* ``IN_PROGRESS``: still copying, or waiting on a broker that has been offline for less than
  the stall window (a broker restart should not fail a run);
* ``STALLED``: its bytes left have not fallen for the stall window (KIP-73: a throttle below
  the produce rate never catches up);
* ``FAILED``: a broker it needs has been offline for the whole stall window, or the partition
  stopped moving towards the step's target (someone cancelled or changed it);
* ``TIMED_OUT``: not done ``step_timeout`` seconds after its submission.

A run is the worst of its steps: FAILED before TIMED_OUT before STALLED, DONE once nothing
is queued or in flight, IN_PROGRESS otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Mapping, Sequence

from kafka_reassign.units import fmt_bytes


class Outcome(str, Enum):
    """How a step or a run stands."""

    DONE = "done"
    IN_PROGRESS = "in_progress"
    STALLED = "stalled"
    FAILED = "failed"
    TIMED_OUT = "timed_out"

    @property
    def final(self) -> bool:
        """True when nothing more will happen to it (the run must act)."""
        return self is not Outcome.IN_PROGRESS


@dataclass
class StepObservation:
    """What one poll saw of one step's partition (read-only; built by the executor's poll).

    :param in_flight: ListPartitionReassignments lists the partition
    :param replicas: assigned replicas now (metadata)
    :param isr: in-sync replicas now
    :param offline: brokers the step needs (target replicas) that are not alive
    :param bytes_left: bytes the step's new (or dir-moving) replicas still have to copy
    :param bytes_total: bytes the step copies in all (grows with produce)
    :param leader_size: the leader's log size (for the measured produce rate)
    :param lagging: (broker, bytes behind) of each replica still copying
    :param dirs_ok: for a log-dir step, every replica is in its wanted dir with no future replica
    """

    in_flight: bool
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    offline: tuple[int, ...] = ()
    bytes_left: int = 0
    bytes_total: int = 0
    leader_size: int | None = None
    lagging: list[tuple[int, int]] = field(default_factory=list)
    dirs_ok: bool = True


@dataclass
class StepWatch:
    """What the outcome of one in-flight step depends on across polls (plain JSON).

    :param submitted_at: unix time of the submission (per-step timeouts count from it)
    :param progress_at: last time its bytes left fell (or the submission)
    :param best_left: lowest bytes left seen (None before the first poll)
    :param offline_since: since when a broker it needs is offline (None = all alive)
    :param diverged_since: since when the partition is neither moving nor at the target
    :param first_leader: (time, leader log size) at the first poll, for the produce rate
    :param last_leader: (time, leader log size) at the latest poll
    :param bytes_total: bytes the step copies (last poll)
    :param bytes_left: bytes left (last poll)
    :param polled_at: when ``bytes_left`` was read (the submission time before a first poll)
    """

    submitted_at: float
    progress_at: float
    best_left: int | None = None
    offline_since: float | None = None
    diverged_since: float | None = None
    first_leader: tuple[float, int] | None = None
    last_leader: tuple[float, int] | None = None
    bytes_total: int = 0
    bytes_left: int = 0
    lagging: list[tuple[int, int]] = field(default_factory=list)
    offline: tuple[int, ...] = ()
    polled_at: float | None = None

    @classmethod
    def start(cls, now: float) -> "StepWatch":
        return cls(submitted_at=now, progress_at=now)

    @property
    def observed(self) -> bool:
        """A poll has seen the step since its submission."""
        return self.polled_at is not None

    def observe(self, obs: StepObservation, now: float) -> None:
        """Fold one poll in: progress clock, offline and divergence clocks, leader growth."""
        if self.best_left is None or obs.bytes_left < self.best_left:
            self.best_left = obs.bytes_left
            self.progress_at = now
        self.bytes_left, self.bytes_total = obs.bytes_left, max(obs.bytes_total, self.bytes_total)
        self.polled_at = now
        self.lagging, self.offline = list(obs.lagging), tuple(obs.offline)
        if obs.offline:
            self.offline_since = self.offline_since if self.offline_since is not None else now
        else:
            self.offline_since = None
        if obs.leader_size is not None:
            self.first_leader = self.first_leader or (now, obs.leader_size)
            self.last_leader = (now, obs.leader_size)

    def produce_rate(self) -> float:
        """Bytes/s the leader's log grew since the first poll (the rate the copy must beat)."""
        if not self.first_leader or not self.last_leader or self.last_leader[0] <= self.first_leader[0]:
            return 0.0
        return max(0.0, (self.last_leader[1] - self.first_leader[1]) / (self.last_leader[0] - self.first_leader[0]))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, a name per field (the saved execution state and a trigger's kwargs)."""
        return {"submitted_at": self.submitted_at, "progress_at": self.progress_at, "best_left": self.best_left,
                "offline_since": self.offline_since, "diverged_since": self.diverged_since,
                "first_leader": list(self.first_leader) if self.first_leader else None,
                "last_leader": list(self.last_leader) if self.last_leader else None,
                "bytes_total": self.bytes_total, "bytes_left": self.bytes_left,
                "lagging": [list(x) for x in self.lagging], "offline": list(self.offline),
                "polled_at": self.polled_at}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | Sequence[Any]) -> "StepWatch":
        """Read :meth:`to_json`, or the positional list earlier releases wrote (a saved state, a
        trigger deferred before an upgrade)."""
        named = _named(d, _LEGACY_WATCH_ORDER)
        first, last = named.get("first_leader"), named.get("last_leader")
        return cls(submitted_at=float(named["submitted_at"]), progress_at=float(named["progress_at"]),
                   best_left=named.get("best_left"), offline_since=named.get("offline_since"),
                   diverged_since=named.get("diverged_since"),
                   first_leader=(float(first[0]), int(first[1])) if first else None,
                   last_leader=(float(last[0]), int(last[1])) if last else None,
                   bytes_total=int(named.get("bytes_total", 0)), bytes_left=int(named.get("bytes_left", 0)),
                   lagging=[(int(b), int(n)) for b, n in named.get("lagging") or []],
                   offline=tuple(named.get("offline") or ()), polled_at=named.get("polled_at"))


#: The field order of the positional StepWatch JSON of earlier releases (read, never written).
_LEGACY_WATCH_ORDER = ("submitted_at", "progress_at", "best_left", "offline_since", "diverged_since", "first_leader",
                       "last_leader", "bytes_total", "bytes_left", "lagging", "offline")


def _named(d: Mapping[str, Any] | Sequence[Any], legacy_order: Sequence[str]) -> Mapping[str, Any]:
    """``d`` by field name; a positional list (earlier releases) is named by ``legacy_order``."""
    return d if isinstance(d, Mapping) else dict(zip(legacy_order, d))


@dataclass(frozen=True)
class OutcomeRules:
    """The time limits outcomes are judged by.

    :param stall_window: seconds without falling bytes left (or with a broker offline) before
        a step stalls (or fails)
    :param step_timeout: seconds from a step's submission to its completion, at most
    :param throttle_rate: the replication throttle in force, named in stall messages
    """

    stall_window: float
    step_timeout: float
    throttle_rate: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"stall_window": self.stall_window, "step_timeout": self.step_timeout,
                "throttle_rate": self.throttle_rate}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | Sequence[Any]) -> "OutcomeRules":
        """Read :meth:`to_json`, or the ``[stall, timeout, rate]`` list of earlier releases."""
        named = _named(d, ("stall_window", "step_timeout", "throttle_rate"))
        return cls(float(named["stall_window"]), float(named["step_timeout"]), named.get("throttle_rate"))


def _is_done(target: tuple[int, ...], obs: StepObservation, log_dir_only: bool) -> bool:
    if obs.in_flight or tuple(obs.replicas) != tuple(target):
        return False
    alive_targets = [b for b in target if b not in obs.offline]
    return all(b in obs.isr for b in alive_targets) and (not log_dir_only or obs.dirs_ok)


def step_outcome(name: str, target: tuple[int, ...], obs: StepObservation, watch: StepWatch,
                 rules: OutcomeRules, now: float, *, log_dir_only: bool = False,
                 produce_rate: float = 0.0) -> tuple[Outcome, str]:
    """Decide one in-flight step after ``watch.observe(obs, now)``: (outcome, message).

    :param name: "topic-partition", named in messages
    :param target: the step's target replicas
    :param produce_rate: a known produce rate into the partition (e.g. from a snapshot); the
        larger of it and the measured leader growth is reported
    """
    if _is_done(target, obs, log_dir_only):
        return Outcome.DONE, f"{name} reached {list(target)} and is in sync"
    if not obs.in_flight and set(obs.replicas) != set(target) and not log_dir_only:
        watch.diverged_since = watch.diverged_since if watch.diverged_since is not None else now
        if now - watch.diverged_since >= rules.stall_window:
            return Outcome.FAILED, (f"{name} is no longer moving to {list(target)} (replicas now "
                                    f"{list(obs.replicas)}): someone cancelled or changed the reassignment; "
                                    "prepare the run again")
    else:
        watch.diverged_since = None
    if now - watch.submitted_at >= rules.step_timeout:
        return Outcome.TIMED_OUT, (f"{name} not finished {rules.step_timeout / 60:g} minute(s) after its "
                                   f"submission ({fmt_bytes(watch.bytes_left)} left): raise move_timeout_minutes "
                                   "(formerly batch_timeout_minutes) or throttle_bytes_per_sec")
    if watch.offline_since is not None:
        if now - watch.offline_since >= rules.stall_window:
            brokers = ", ".join(map(str, watch.offline))
            return Outcome.FAILED, (f"broker {brokers} has been offline for {now - watch.offline_since:.0f} s, so "
                                    f"{name} cannot finish moving: start the broker again and re-run (finished "
                                    "moves are not repeated), or cancel and plan without it")
        return Outcome.IN_PROGRESS, f"{name}: waiting for broker {', '.join(map(str, watch.offline))} (offline)"
    if watch.bytes_left > 0 and now - watch.progress_at >= rules.stall_window:
        return Outcome.STALLED, stall_message(name, watch, rules, max(produce_rate, watch.produce_rate()))
    return Outcome.IN_PROGRESS, f"{name}: {fmt_bytes(watch.bytes_left)} left"


def stall_message(name: str, watch: StepWatch, rules: OutcomeRules, produce_rate: float) -> str:
    """Name the partition, the lagging broker, the throttle and the produce rate, and what to change."""
    broker = max(watch.lagging, key=lambda x: x[1])[0] if watch.lagging else None
    where = f" on broker {broker}" if broker is not None else ""
    throttle = f"{fmt_bytes(rules.throttle_rate)}/s" if rules.throttle_rate else "none"
    head = (f"{name} stalled: its new replica{where} has not caught up for {rules.stall_window:.0f} s "
            f"({fmt_bytes(watch.bytes_left)} behind); throttle {throttle}, produce rate "
            f"{fmt_bytes(produce_rate)}/s into {name}")
    if rules.throttle_rate and produce_rate >= 0.8 * rules.throttle_rate:
        return head + (f": the throttle is not above the produce rate; raise throttle_bytes_per_sec above "
                       f"{fmt_bytes(produce_rate)}/s (e.g. {int(produce_rate * 2)})")
    return head + (": check that broker's disk and network, raise throttle_bytes_per_sec, or lower "
                   "max_movements_per_broker")


def run_outcome(dead: Iterable[Outcome], in_flight: int, queued: int) -> Outcome:
    """A run's outcome from its dead steps' outcomes and what is left to do."""
    seen = set(dead)
    for worst in (Outcome.FAILED, Outcome.TIMED_OUT, Outcome.STALLED):
        if worst in seen:
            return worst
    return Outcome.DONE if in_flight == 0 and queued == 0 else Outcome.IN_PROGRESS


def outcome_of(value: Any) -> Outcome:
    """An Outcome from its value or name (JSON round trips)."""
    if isinstance(value, Outcome):
        return value
    try:
        return Outcome(str(value))
    except ValueError:
        return Outcome[str(value).upper()]
