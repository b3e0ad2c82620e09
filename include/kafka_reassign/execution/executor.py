"""The pipelined executor: a sliding window of KIP-435 steps in flight, refilled as steps finish.

Like Cruise Control's executor, the plan is a queue of steps and the window holds as many of
them in flight as the caps allow:

* ``max_partition_movements``: steps in flight in the whole cluster;
* ``max_movements_per_broker``: steps adding or removing a replica on any one broker, or
  copying from it as the leader;
* ``max_leader_movements``: steps in flight that change a partition's preferred leader.

A partition's next step becomes eligible only when its previous one is done (a step's
``current`` is the previous step's ``target``). Each :meth:`MoveExecutor.tick` polls the
steps in flight (:mod:`kafka_reassign.execution.cluster_io`: requests sized by the window, not the
plan), judges each with :func:`kafka_reassign.execution.outcome.step_outcome`, then refills the window
in the order of the chosen strategy (:mod:`kafka_reassign.execution.order`): the throttled
replica lists gain the new steps' entries and lose the finished ones' (one config write), and
the new steps go out in one AlterPartitionReassignments. When a step dies (stalled, failed,
timed out) nothing new is submitted and the run ends with that outcome; cancelling what is
in flight and restoring the throttle are the caller's (``cancel_on_failure``, teardown).

:func:`run_execution` is the loop of the CLI and the rehearsal; the DAG runs the same ticks
from a deferrable operator. The state is plain JSON (one character per step), saved through
an :class:`~kafka_reassign.execution.store.ExecutionStore` after every poll, so a killed worker
resumes without resubmitting anything that finished.
"""
from __future__ import annotations

import logging
import time
import zlib
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from kafka_reassign import defaults as D
from kafka_reassign.errors import ParamError, Problem
from kafka_reassign.execution.cluster_io import classify, elect_leaders, observe, read_cluster, submit
from kafka_reassign.execution.order import DEFAULT_STRATEGY, OrderContext, ReadyQueue, parse_strategy
from kafka_reassign.execution.outcome import Outcome, OutcomeRules, StepWatch, outcome_of, run_outcome, step_outcome
from kafka_reassign.execution.progress import RECENT_DONE_ROWS, ProgressView, StepRow
from kafka_reassign.throttle.record import note_submitted
from kafka_reassign.throttle.replica_lists import ReplicaThrottle
from kafka_reassign.cluster.state import InFlight, TopicPartition
from kafka_reassign.execution.steps import StepMove

log = logging.getLogger(__name__)

QUEUED, IN_FLIGHT, DONE, DEAD = "q", "f", "d", "x"


@dataclass(frozen=True)
class ExecutionLimits:
    """Caps on what is in flight, and the time limits steps are judged by.

    :param max_partition_movements: steps in flight in the whole cluster
    :param max_movements_per_broker: steps adding or removing a replica on one broker, or copying
        from it as the leader
    :param max_leader_movements: steps in flight that change the preferred leader
    :param step_timeout_seconds: a step not done this long after its submission times out
    :param stall_window_seconds: bytes left not falling (or a needed broker offline) this long
    :param strategy: ordering strategy, see :mod:`kafka_reassign.execution.order`
    """

    max_partition_movements: int = D.MAX_PARTITION_MOVEMENTS
    max_movements_per_broker: int = D.MAX_MOVEMENTS_PER_BROKER
    max_leader_movements: int = D.MAX_LEADER_MOVEMENTS
    step_timeout_seconds: float = D.MOVE_TIMEOUT_MINUTES * 60.0
    stall_window_seconds: float = D.STALL_WINDOW_SECONDS
    strategy: str = DEFAULT_STRATEGY

    @classmethod
    def from_params(cls, params: Any, strategy: str | None = None) -> "ExecutionLimits":
        """From validated run params (``move_timeout_minutes`` is the per-step timeout)."""
        return cls(max_partition_movements=params.max_partition_movements,
                   max_movements_per_broker=params.max_movements_per_broker,
                   max_leader_movements=params.max_leader_movements,
                   step_timeout_seconds=float(params.move_timeout_minutes) * 60.0,
                   stall_window_seconds=float(params.stall_window_seconds),
                   strategy=strategy or getattr(params, "movement_strategy", None) or cls.strategy)

    def validate(self, steps: Sequence[StepMove] = ()) -> None:
        """Raise :class:`ParamError` naming every limit at or below 0, or a step that can never fit."""
        problems = []
        for name in ("max_partition_movements", "max_movements_per_broker", "max_leader_movements",
                     "step_timeout_seconds", "stall_window_seconds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                problems.append(Problem(name, f"must be > 0, got {v!r}", "bad_param"))
        try:
            parse_strategy(self.strategy)
        except ValueError as exc:
            problems.append(Problem("strategy", str(exc), "bad_param"))
        if not problems:
            for s in steps:
                # A step adds or removes at most one replica per broker: it needs one slot on each.
                load = {b: 1 for b in s.brokers_touched}
                over = [b for b, n in load.items() if n > self.max_movements_per_broker]
                if over or (s.moves_leader and self.max_leader_movements < 1):
                    problems.append(Problem(s.name, f"step {list(s.current)} -> {list(s.target)} can never fit "
                                            "max_movements_per_broker / max_leader_movements", "bad_param"))
                    break
        if problems:
            raise ParamError(problems, "execution limits")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def data_brokers(step: StepMove, leader: int | None) -> tuple[int, ...]:
    """Brokers a step's bytes go through: the one sending (the leader) and the receivers."""
    if step.is_log_dir_only:
        return tuple(sorted(step.wanted_dirs()))
    if not step.adding:
        return ()
    source = leader if leader is not None and leader in step.current else step.current[0]
    return (source, *step.adding)


def steps_fingerprint(steps: Sequence[StepMove]) -> str:
    """A short digest of the steps: a saved state only resumes the very same plan."""
    crc = 0
    for s in steps:
        crc = zlib.crc32(f"{s.topic}\0{s.partition}\0{s.current}\0{s.target}\0{s.log_dirs}\n".encode(), crc)
    return f"{len(steps)}:{crc:08x}"


class MoveExecutor:
    """Owns the state of every step of a run: queued, in flight, done or dead.

    :param steps: every KIP-435 step of the run, each partition's steps in order
    :param limits: caps and time limits
    :param run_id: the run (names its state and throttle record)
    :param throttle_rate: replication throttle in force (named in stall messages)
    :param replica_throttle: keeps the throttled-replica lists to the steps in flight (None = the
        run is not throttled)
    :param leaders: partition -> leader when prepared (the broker sending a step's bytes)
    :param urp: partitions under-replicated when prepared (``postpone-urp``)
    :param produce_rates: partition -> known produce rate in bytes/s (stall messages)
    :param record_store: the run's record store: targets are noted there as submitted *before*
        each AlterPartitionReassignments (so a later run or the reconciler knows them as ours)
    :param cluster_id: recorded with a new record
    """

    def __init__(self, steps: Sequence[StepMove], limits: ExecutionLimits, *, run_id: str = "",
                 throttle_rate: int | None = None, replica_throttle: ReplicaThrottle | None = None,
                 leaders: Mapping[TopicPartition, int] | None = None, urp: Iterable[TopicPartition] = (),
                 produce_rates: Mapping[TopicPartition, float] | None = None,
                 record_store: Any = None, cluster_id: str | None = None) -> None:
        limits.validate(steps)
        self.record_store = record_store
        self.cluster_id = cluster_id
        self.steps = list(steps)
        self.limits = limits
        self.run_id = run_id
        self.rules = OutcomeRules(limits.stall_window_seconds, limits.step_timeout_seconds, throttle_rate)
        self.replica_throttle = replica_throttle
        self.leaders = dict(leaders or {})
        self.produce_rates = dict(produce_rates or {})
        self.status = bytearray(QUEUED.encode() * len(self.steps))
        self.watches: dict[int, StepWatch] = {}
        self.dead: dict[int, tuple[Outcome, str]] = {}
        self.started_at: float | None = None
        self.first_submit_at: float | None = None
        self.polls = 0
        self.submissions = 0
        self._listing: dict[TopicPartition, InFlight] | None = None
        self._touched_topics: set[str] = set()
        self._dead_moving: set[int] = set()
        self._adopted: set[int] = set()
        self._finished_leaders: list[TopicPartition] = []
        self._verify = True  # the first refill checks the candidates against the cluster
        self._dir_moves: dict[int, dict[tuple[str, int, int], str]] = {}
        self._recent_done: deque[int] = deque(maxlen=RECENT_DONE_ROWS)
        self._rate_samples: deque[tuple[float, float]] = deque(maxlen=8)
        self._index(set(urp))

    def _index(self, urp_keys: set[TopicPartition]) -> None:
        """Chains, per-step bytes and brokers, counters: everything derived from the steps."""
        n = len(self.steps)
        self.next_of = [-1] * n
        self.prev_of = [-1] * n
        last: dict[TopicPartition, int] = {}
        for i, s in enumerate(self.steps):
            if s.key in last:
                self.next_of[last[s.key]] = i
                self.prev_of[i] = last[s.key]
            last[s.key] = i
        self.step_bytes = [float(s.bytes_to_copy) for s in self.steps]
        self.chain_left = [0.0] * n
        for i in range(n - 1, -1, -1):
            nxt = self.next_of[i]
            self.chain_left[i] = self.step_bytes[i] + (self.chain_left[nxt] if nxt >= 0 else 0.0)
        self.data = [data_brokers(s, self.leaders.get(s.key)) for s in self.steps]
        # A step occupies a slot on every broker it adds to or removes from, and on the leader it
        # copies from: a leader serving many copies at once splits its throttle among them and
        # holds the receivers' slots while it does.
        self.touched = [tuple(sorted(set(s.brokers_touched) | set(d))) for s, d in zip(self.steps, self.data)]
        self.bytes_total = int(sum(self.step_bytes))
        self.partitions_total = len(last)
        self.fingerprint = steps_fingerprint(self.steps)
        self.broker_left: dict[int, float] = {}
        self.order = OrderContext(self.broker_left, self.chain_left, self.step_bytes, self.data,
                                  {i for i, s in enumerate(self.steps) if s.key in urp_keys})
        self._strategy = parse_strategy(self.limits.strategy)
        self._reset_counters()

    def _reset_counters(self) -> None:
        """Loads, bytes left per broker and the eligible set, from ``status``."""
        self.broker_load: dict[int, int] = {}
        self.leader_load = 0
        self.done_bytes = 0.0
        self.partitions_done = 0
        self.ready = ReadyQueue(self._strategy, self.order)
        left = self.broker_left
        left.clear()  # shared with the strategies' context
        counts = {QUEUED: 0, IN_FLIGHT: 0, DONE: 0, DEAD: 0}
        for i, code in enumerate(self.status):
            c = chr(code)
            counts[c] += 1
            if c == DONE:
                self.done_bytes += self.step_bytes[i]
                self.partitions_done += self.next_of[i] < 0
                continue
            for b in self.data[i]:
                left[b] = left.get(b, 0.0) + self.step_bytes[i]
            if c == IN_FLIGHT:
                self._hold(i, +1)
            elif c == QUEUED and (self.prev_of[i] < 0 or chr(self.status[self.prev_of[i]]) == DONE):
                self.ready.add(i)
        self.counts = counts

    def _hold(self, i: int, d: int) -> None:
        for b in self.touched[i]:
            self.broker_load[b] = self.broker_load.get(b, 0) + d
        if self.steps[i].moves_leader:
            self.leader_load += d

    def _set(self, i: int, code: str) -> None:
        self.counts[chr(self.status[i])] -= 1
        self.counts[code] += 1
        self.status[i] = ord(code)

    # -- what is where ---------------------------------------------------------------
    @property
    def in_flight(self) -> list[int]:
        return sorted(self.watches)

    def outcome(self) -> Outcome:
        return run_outcome((o for o, _ in self.dead.values()), self.counts[IN_FLIGHT], self.counts[QUEUED])

    @property
    def message(self) -> str:
        if self.dead:
            return next(iter(self.dead.values()))[1]
        return ""

    # -- one poll ----------------------------------------------------------------------
    def tick(self, admin: Any, now: float | None = None) -> None:
        """Poll the steps in flight, then refill the window (what one loop iteration does)."""
        now = time.time() if now is None else now
        self.poll(admin, now)
        self.refill(admin, now)

    def poll(self, admin: Any, now: float) -> list[TopicPartition]:
        """Read the steps in flight and judge each; returns partitions whose last step finished."""
        self.started_at = self.started_at if self.started_at is not None else now
        self.polls += 1
        flying = self.in_flight
        if not flying:
            self._listing = None
            return []
        view = read_cluster(admin, [self.steps[i] for i in flying])
        self._listing = view.in_flight
        finished: list[TopicPartition] = []
        for i in flying:
            s = self.steps[i]
            obs = observe(s, view)
            w = self.watches[i]
            w.observe(obs, now)
            outcome, msg = step_outcome(s.name, s.target, obs, w, self.rules, now,
                                        log_dir_only=s.is_log_dir_only, produce_rate=self.produce_rates.get(s.key, 0.0))
            if outcome is Outcome.DONE:
                self._finish(i)
                # Leadership moves by itself when the old leader leaves; otherwise elect the new
                # preferred leader once the partition's last step is done (not mid-chain, where
                # it would make one new broker the source of every later copy).
                if self.next_of[i] < 0 and s.target and self.leaders.get(s.key, s.target[0]) != s.target[0] \
                        and self.leaders.get(s.key) in s.target:
                    finished.append(s.key)
            elif outcome.final:
                self._kill(i, outcome, msg)
        self._finished_leaders = finished
        return finished

    def _finish(self, i: int) -> None:
        """Step ``i`` is done: free its slots, count its bytes, make the partition's next step eligible."""
        if i in self.watches:
            self.watches.pop(i)
            self._hold(i, -1)
        self._set(i, DONE)
        self.done_bytes += self.step_bytes[i]
        for b in self.data[i]:
            self.broker_left[b] = self.broker_left.get(b, 0.0) - self.step_bytes[i]
        self._touched_topics.add(self.steps[i].topic)
        self._recent_done.append(i)
        nxt = self.next_of[i]
        if nxt >= 0:
            self.ready.add(nxt)
        else:
            self.partitions_done += 1

    def _kill(self, i: int, outcome: Outcome, message: str, *, moving: bool = True) -> None:
        """Step ``i`` is dead: the run stops submitting and ends with ``outcome``.

        :param moving: its reassignment may still be in flight: its throttle entries stay
            (until cancel_on_failure / the teardown), never a move left unthrottled
        """
        if i in self.watches:
            self.watches.pop(i)
            self._hold(i, -1)
            if moving:
                self._dead_moving.add(i)
        self.ready.discard(i)
        self._set(i, DEAD)
        self.dead[i] = (outcome, message)
        log.error("run %s: %s", self.run_id, message)

    # -- refill --------------------------------------------------------------------------
    def pick(self) -> list[int]:
        """The eligible steps that fit the caps now, in strategy order (slots are taken)."""
        room = self.limits.max_partition_movements - self.counts[IN_FLIGHT]
        if room <= 0 or not len(self.ready) or self.dead:
            return []
        cap_b, cap_l = self.limits.max_movements_per_broker, self.limits.max_leader_movements
        chosen: list[int] = []
        for bucket in self.ready.walk():
            for _, i in bucket:
                full = [b for b in self.touched[i] if self.broker_load.get(b, 0) >= cap_b]
                if full:
                    if self.ready.by_brokers and any(b in self.data[i] for b in full):
                        break  # a receiving broker of the whole bucket is full
                    continue
                if self.steps[i].moves_leader and self.leader_load >= cap_l:
                    continue
                self._hold(i, +1)
                chosen.append(i)
                if len(chosen) >= room:
                    return chosen
        return chosen

    def refill(self, admin: Any, now: float) -> list[int]:
        """Submit the next eligible steps that fit; returns the indices now in flight because of it."""
        started: list[int] = []
        for _ in range(8):  # steps found already done free their slot and their successor: look again
            chosen = self.pick()
            if not chosen:
                break
            admitted, skipped = self._admit(admin, chosen, now)
            started += admitted
            if not skipped:
                break
        to_send = {i: self.steps[i] for i in started if i not in self._adopted}
        targets = {s.key: s.target for s in to_send.values() if not s.is_log_dir_only}
        # Recorded as submitted (with the replica lists, one record write) before submitting.
        self._sync_throttle(admin, started, targets)
        if to_send:
            if self.record_store is not None and self.replica_throttle is None and targets:
                note_submitted(self.record_store, self.run_id, self.cluster_id, targets,
                               {self.steps[i].key for i in (*self.watches, *self._dead_moving)})
            refused = submit(admin, to_send, self._dir_moves)
            for i, err in refused.items():
                self._kill(i, Outcome.FAILED, err, moving=False)
                self._touched_topics.add(self.steps[i].topic)
            if refused:
                self._sync_throttle(admin, [])
            self.submissions += 1
        if started:
            self.first_submit_at = self.first_submit_at if self.first_submit_at is not None else now
        self._adopted.clear()
        self._dir_moves = {}
        elect_leaders(admin, self._finished_leaders)
        self._finished_leaders = []
        return started

    def _admit(self, admin: Any, chosen: list[int], now: float) -> tuple[list[int], bool]:
        """Classify the chosen steps against the cluster; (indices now in flight, any found done)."""
        if self._listing is None:
            self._listing = admin.list_partition_reassignments(None)
        adm = classify({i: self.steps[i] for i in chosen}, self._listing, admin, verify=self._verify)
        self._verify = False
        for i in adm.skipped:
            self._hold(i, -1)
            self.ready.discard(i)
            self._finish(i)
        for i, msg in adm.refused.items():
            self._hold(i, -1)
            self._kill(i, Outcome.FAILED, msg, moving=False)
        admitted = adm.submit + adm.adopted
        self._adopted.update(adm.adopted)
        self._dir_moves.update(adm.dir_moves)
        for i in admitted:
            self.ready.discard(i)
            self._set(i, IN_FLIGHT)
            self.watches[i] = StepWatch.start(now)
        if adm.adopted:
            log.info("run %s: adopted %d step(s) already in flight to their target", self.run_id, len(adm.adopted))
        return admitted, bool(adm.skipped)

    def _sync_throttle(self, admin: Any, started: list[int], submitting: dict | None = None) -> None:
        """One update of the throttled-replica lists: entries of what is in flight, nothing else."""
        topics = self._touched_topics | {self.steps[i].topic for i in started}
        self._touched_topics = set()
        if self.replica_throttle is None or not (topics or submitting):
            return
        moving = [self.steps[i] for i in (*self.watches, *self._dead_moving)]
        self.replica_throttle.update(admin, moving, topics, submitting)

    # -- durable state -------------------------------------------------------------------
    def state_json(self) -> dict[str, Any]:
        """Compact plain-JSON state: one character per step, details only for steps in flight or dead."""
        return {"v": 1, "run_id": self.run_id, "fingerprint": self.fingerprint,
                "status": self.status.decode(), "watch": {str(i): w.to_json() for i, w in self.watches.items()},
                "dead": {str(i): [o.value, m] for i, (o, m) in self.dead.items()},
                "dead_moving": sorted(self._dead_moving), "started_at": self.started_at,
                "first_submit_at": self.first_submit_at, "polls": self.polls, "submissions": self.submissions,
                "rate": [list(x) for x in self._rate_samples]}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_json` of the same steps (raises ValueError for another plan)."""
        fp = self.fingerprint
        if state.get("fingerprint") != fp:
            raise ValueError(f"the saved execution state is for other steps ({state.get('fingerprint')} "
                             f"!= {fp}): it cannot be resumed with this plan")
        self.status = bytearray(str(state["status"]).encode())
        self.watches = {int(i): StepWatch.from_json(w) for i, w in state.get("watch", {}).items()}
        self.dead = {int(i): (outcome_of(o), str(m)) for i, (o, m) in state.get("dead", {}).items()}
        self._dead_moving = {int(i) for i in state.get("dead_moving", [])}
        self.started_at = state.get("started_at")
        self.first_submit_at = state.get("first_submit_at")
        self.polls = int(state.get("polls", 0))
        self.submissions = int(state.get("submissions", 0))
        self._rate_samples.clear()
        self._rate_samples.extend((float(t), float(m)) for t, m in state.get("rate", []))
        self._verify = True
        self._reset_counters()

    # -- the trigger's share: watch the steps in flight without the whole plan -------------
    def watch_spec(self) -> dict[str, Any]:
        """Plain JSON for a trigger: the steps in flight, their watches and the rules."""
        return {"steps": {str(i): self.steps[i].to_json() for i in self.watches},
                "watch": {str(i): w.to_json() for i, w in self.watches.items()},
                "rules": self.rules.to_json()}

    def merge_watches(self, watch: Mapping[str, Any]) -> None:
        """Take the stall and offline clocks a trigger kept while it watched."""
        for i, w in watch.items():
            if int(i) in self.watches:
                self.watches[int(i)] = StepWatch.from_json(w)

    # -- progress ------------------------------------------------------------------------
    def progress(self, now: float | None = None) -> ProgressView:
        """Counts, bytes moved and left, rate, ETA and the rows of the steps worth showing."""
        now = time.time() if now is None else now
        moving = sum(max(0, w.bytes_total - w.bytes_left) for w in self.watches.values())
        moved = int(self.done_bytes + moving)
        if not self._rate_samples or self._rate_samples[-1][0] < now:
            self._rate_samples.append((now, float(moved)))
        rate = None
        (t0, m0), (t1, m1) = self._rate_samples[0], self._rate_samples[-1]
        if t1 > t0:
            rate = max(0.0, (m1 - m0) / (t1 - t0))
        # Left: what each step in flight still lacks as last observed (a log written to meanwhile
        # grows it), plus the planned bytes of the steps not submitted yet.
        queued = self.bytes_total - self.done_bytes - sum(self.step_bytes[i] for i in self.watches)
        left = int(max(0.0, queued) + sum(self._watch_left(i) for i in self.watches))
        outcome = self.outcome()
        eta = 0.0 if outcome is Outcome.DONE else (left / rate if rate else None)
        return ProgressView(
            run_id=self.run_id, outcome=outcome.value, message=self.message, steps_total=len(self.steps),
            steps_done=self.counts[DONE], steps_in_flight=self.counts[IN_FLIGHT], steps_queued=self.counts[QUEUED],
            steps_dead=self.counts[DEAD], partitions_total=self.partitions_total,
            partitions_done=self.partitions_done, bytes_total=max(self.bytes_total, moved + left), bytes_moved=moved,
            bytes_left=left,
            rate_bytes_per_sec=rate, eta_seconds=eta, started_at=self.started_at,
            first_submit_at=self.first_submit_at, updated_at=now, polls=self.polls,
            throttle_bytes_per_sec=self.rules.throttle_rate, rows=self._rows())

    def _watch_left(self, i: int) -> int:
        """Bytes step ``i`` still lacks: as last observed, or all of it before its first observation."""
        w = self.watches[i]
        return int(w.bytes_left if w.bytes_total else self.step_bytes[i])

    def _rows(self) -> list[StepRow]:
        out = []
        for i in [*sorted(self.dead), *self.in_flight, *reversed(self._recent_done)]:
            s, w = self.steps[i], self.watches.get(i)
            if i in self.dead:
                status, msg = self.dead[i][0].value, self.dead[i][1]
            else:
                status, msg = (IN_FLIGHT_NAME, "") if w is not None else ("done", "")
            out.append(StepRow(name=s.name, step=f"{s.step_index + 1}/{s.step_count}", status=status,
                               current=list(s.current), target=list(s.target),
                               bytes_total=w.bytes_total if w and w.bytes_total else int(self.step_bytes[i]),
                               bytes_left=self._watch_left(i) if w else 0,
                               submitted_at=w.submitted_at if w else None, message=msg))
        return out


IN_FLIGHT_NAME = "in_flight"


def watch_poll(admin: Any, spec: dict[str, Any], now: float, seen_offline: set[int] | None = None
               ) -> tuple[dict[str, Any], list[str]]:
    """One poll of a trigger's steps (see :meth:`MoveExecutor.watch_spec`), judged like the executor's.

    :param seen_offline: step indices already reported waiting on an offline broker
    :returns: (the spec with updated watches, reasons to hand back to the executor: a step
        finished or died, or a broker it needs just went offline; empty = keep waiting)
    """
    steps = {int(i): StepMove.from_json(d) for i, d in spec["steps"].items()}
    watches = {int(i): StepWatch.from_json(w) for i, w in spec["watch"].items()}
    rules = OutcomeRules.from_json(spec["rules"])
    reasons: list[str] = []
    if steps:
        view = read_cluster(admin, list(steps.values()))
        for i, s in steps.items():
            obs = observe(s, view)
            was_offline = watches[i].offline_since is not None
            watches[i].observe(obs, now)
            outcome, msg = step_outcome(s.name, s.target, obs, watches[i], rules, now,
                                        log_dir_only=s.is_log_dir_only)
            if outcome is not Outcome.IN_PROGRESS:
                reasons.append(msg)
            elif obs.offline and not was_offline and (seen_offline is None or i not in seen_offline):
                reasons.append(msg)
                if seen_offline is not None:
                    seen_offline.add(i)
    spec = {**spec, "watch": {str(i): w.to_json() for i, w in watches.items()}}
    return spec, reasons


def run_execution(admin: Any, executor: MoveExecutor, store: Any, *, poll_seconds: float,
                  on_progress: Callable[[ProgressView], None] | None = None,
                  should_stop: Callable[[ProgressView], bool] | None = None,
                  sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time) -> ProgressView:
    """Tick, save, report, sleep until the run is done, dead or asked to stop.

    :param store: an :class:`~kafka_reassign.execution.store.ExecutionStore` (None = not durable)
    :param poll_seconds: time between polls; a finished step waits at most this long for its successor
    :param should_stop: checked after each poll (e.g. a signal): True returns with the run in progress
    :returns: the last progress view (its ``outcome`` says how the run ended)
    """
    while True:
        now = clock()
        executor.tick(admin, now)
        view = executor.progress(now)
        if store is not None:
            store.save(executor.run_id, executor.state_json(), view.to_json())
        if on_progress is not None:
            on_progress(view)
        if view.finished or (should_stop is not None and should_stop(view)):
            return view
        sleep(poll_seconds)
