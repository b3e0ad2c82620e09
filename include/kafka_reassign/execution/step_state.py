"""The state of every step of a run (queued, in flight, done, dead) and what is derived from it.

:class:`StepStates` is the base of :class:`~kafka_reassign.execution.executor.MoveExecutor`: it
holds the status of each step, the slots held on brokers, the eligible queue and the counters,
and changes them only through :meth:`StepStates._finish`, :meth:`StepStates._kill` and
:meth:`StepStates._set`. Its durable form is :meth:`StepStates.state_json`. The window
(:mod:`~kafka_reassign.execution.window`), the poll (:mod:`~kafka_reassign.execution.poll`) and the
progress view (:mod:`~kafka_reassign.execution.reporting`) are the other parts of the executor.
"""
from __future__ import annotations

import logging
import zlib
from collections import deque
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.cluster.state import InFlight, TopicPartition
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.execution.health import CapGovernor, MinIsrCache, read_health
from kafka_reassign.execution.order import OrderContext, ReadyQueue, parse_strategy
from kafka_reassign.execution.outcome import Outcome, OutcomeRules, StepWatch, outcome_of, run_outcome
from kafka_reassign.execution.progress import RECENT_DONE_ROWS
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.planning.leadership import senders
from kafka_reassign.execution.wake import FlightItem, WakeRule
from kafka_reassign.throttle.replica_lists import ReplicaThrottle
from kafka_reassign.units import DEFAULT_NETWORK_BYTES_PER_SEC

if TYPE_CHECKING:
    from kafka_reassign.execution.limits import ExecutionLimits

log = logging.getLogger("kafka_reassign.execution.executor")

QUEUED, IN_FLIGHT, DONE, DEAD = "q", "f", "d", "x"


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


class StepStates:
    """Owns the state of every step of a run; see :class:`~kafka_reassign.execution.executor.MoveExecutor`
    for the parameters."""

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
        self.checks = 0
        self.leader_changes = 0
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
        #: brokers whose eligible steps the last pick held back for their bytes in flight
        self._held_back: set[int] = set()
        self._last_check = 0.0
        #: adapts the caps to the ISR health of the moves in flight (None: the caps are fixed)
        self.governor = CapGovernor(limits.max_partition_movements, limits.max_movements_per_broker,
                                    limits.min_movements_per_broker) if limits.adaptive_concurrency else None
        self._min_isr = MinIsrCache()
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
        #: the broker expected to lead each step when it runs (lead steps hand leadership on)
        self.sender = senders(self.steps, self.leaders)
        self.data = [data_brokers(s, lead) for s, lead in zip(self.steps, self.sender)]
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
    def partition_cap(self) -> int:
        """Steps allowed in flight in the whole cluster now (adaptive concurrency may have lowered it)."""
        return self.governor.cluster if self.governor is not None else self.limits.max_partition_movements

    @property
    def broker_cap(self) -> int:
        """Steps allowed in flight on a broker in good health (see :attr:`reduced_broker_caps`)."""
        return self.limits.max_movements_per_broker

    @property
    def reduced_broker_caps(self) -> dict[int, int]:
        """Brokers whose cap adaptive concurrency lowered below :attr:`broker_cap`, and that cap."""
        return self.governor.brokers if self.governor is not None else {}

    def govern(self, admin: KafkaAdminPort, now: float) -> None:
        """When a health read is due, read the ISR of the moves in flight and adapt the caps to it."""
        g = self.governor
        if g is None or not g.due(now):
            return
        try:
            health = read_health(admin, [self.steps[i] for i in self.watches], self._min_isr)
        except KafkaAdminError as exc:  # the caps stay as they are until the next read
            log.warning("run %s: health read failed (%s); caps unchanged", self.run_id, exc)
            return
        change = g.observe(health, now)
        if change is not None:
            log.warning("run %s: %s", self.run_id, change.text)

    @property
    def move_rate(self) -> float:
        """Bytes/s one broker moves: the run's throttle, or a NIC's when the run is unthrottled."""
        return float(self.rules.throttle_rate or DEFAULT_NETWORK_BYTES_PER_SEC)

    def flight_items(self) -> dict[int, FlightItem]:
        """The steps in flight as the wake schedule sees them (bytes left as last observed)."""
        return self.wake_rule().items(self.watches)

    def wake_rule(self) -> WakeRule:
        """What the watch needs to schedule its wakes (:mod:`kafka_reassign.execution.wake`)."""
        rate = self.move_rate
        return WakeRule(rate=rate, low_water=rate * self.limits.budget_seconds / 2.0,
                        held_back=tuple(sorted(self._held_back)),
                        brokers={i: self.data[i] for i in self.watches},
                        planned={i: self.step_bytes[i] for i in self.watches})

    def wake_at(self, now: float) -> tuple[float | None, float | None]:
        """(next cheap check for a step due to finish, when a broker holding steps back runs low)."""
        return self.wake_rule().times(self.watches, self._last_check, now)

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

    # -- durable state -------------------------------------------------------------------
    def state_json(self) -> dict[str, Any]:
        """Compact plain-JSON state: one character per step, details only for steps in flight or dead."""
        return {"v": 1, "run_id": self.run_id, "fingerprint": self.fingerprint,
                "status": self.status.decode(), "watch": {str(i): w.to_json() for i, w in self.watches.items()},
                "dead": {str(i): [o.value, m] for i, (o, m) in self.dead.items()},
                "dead_moving": sorted(self._dead_moving), "started_at": self.started_at,
                "first_submit_at": self.first_submit_at, "polls": self.polls, "checks": self.checks, "leader_changes": self.leader_changes,
                "submissions": self.submissions, "rate": [list(x) for x in self._rate_samples],
                "caps": self.governor.to_json() if self.governor is not None else None}

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
        self.checks = int(state.get("checks", 0))
        self.leader_changes = int(state.get("leader_changes", 0))
        self.submissions = int(state.get("submissions", 0))
        self._rate_samples.clear()
        self._rate_samples.extend((float(t), float(m)) for t, m in state.get("rate", []))
        if self.governor is not None and state.get("caps"):  # absent from states saved before it
            self.governor.load(state["caps"])
        self._verify = True
        self._reset_counters()

    # -- the trigger's share: watch the steps in flight without the whole plan -------------
    def watch_spec(self) -> dict[str, Any]:
        """Plain JSON for a trigger: the steps in flight, their watches and the rules."""
        return {"steps": {str(i): self.steps[i].to_json() for i in self.watches},
                "watch": {str(i): w.to_json() for i, w in self.watches.items()},
                "rules": self.rules.to_json(), "wake": self.wake_rule().to_json()}

    def merge_watches(self, watch: Mapping[str, Any]) -> None:
        """Take the stall and offline clocks a trigger kept while it watched."""
        for i, w in watch.items():
            if int(i) in self.watches:
                self.watches[int(i)] = StepWatch.from_json(w)
