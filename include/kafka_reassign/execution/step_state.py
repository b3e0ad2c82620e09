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
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.cluster.state import InFlight, TopicPartition
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.execution.book import StepBook, data_brokers, step_lanes
from kafka_reassign.execution.health import CapGovernor, MinIsrCache, read_health
from kafka_reassign.execution.order import OrderContext, ReadyQueue, parse_strategy
from kafka_reassign.execution.outcome import Outcome, OutcomeRules, StepWatch, outcome_of, run_outcome
from kafka_reassign.execution.progress import RECENT_DONE_ROWS
from kafka_reassign.execution.rate_control import rate_control_for
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.execution.wake import FlightItem, WakeRule, flight_item
from kafka_reassign.execution.windows import format_instant, parse_windows
from kafka_reassign.throttle.replica_lists import ReplicaThrottle
from kafka_reassign.units import DEFAULT_NETWORK_BYTES_PER_SEC

if TYPE_CHECKING:
    from kafka_reassign.execution.limits import ExecutionLimits

log = logging.getLogger("kafka_reassign.execution.executor")

QUEUED, IN_FLIGHT, DONE, DEAD = "q", "f", "d", "x"


class StepStates:
    """Owns the state of every step of a run; see :class:`~kafka_reassign.execution.executor.MoveExecutor`
    for the parameters (and ``book``: the run's steps in pages, instead of ``steps``).

    Only the pages it works on are loaded (:mod:`~kafka_reassign.execution.book`): those holding a
    step in flight, dead, or eligible soon. Pages before :attr:`cursor` that are not loaded are done,
    those from it on are untouched. The per-step tables (``steps``, ``step_bytes``, ``data``, ...)
    hold the loaded steps, keyed by the step's index in the plan.
    """

    def __init__(self, steps: Sequence[StepMove], limits: ExecutionLimits, *, run_id: str = "",
                 throttle_rate: int | None = None, replica_throttle: ReplicaThrottle | None = None,
                 leaders: Mapping[TopicPartition, int] | None = None, urp: Iterable[TopicPartition] = (),
                 produce_rates: Mapping[TopicPartition, float] | None = None,
                 record_store: Any = None, cluster_id: str | None = None, book: StepBook | None = None) -> None:
        if book is None:
            limits.validate(steps)
            book = StepBook.in_memory(steps, leaders, urp, limits.strategy)
        else:
            limits.validate()  # the steps were checked against the limits when the book was made
        self.book = book
        head = book.head
        self.record_store = record_store
        self.cluster_id = cluster_id
        self.limits = limits
        self.run_id = run_id
        self.rules = OutcomeRules(limits.stall_window_seconds, limits.step_timeout_seconds, throttle_rate)
        self.replica_throttle = replica_throttle
        self.produce_rates = dict(produce_rates or {})
        self.steps_total, self.partitions_total = head.steps, head.partitions
        self.bytes_total, self.fingerprint = int(head.bytes_total), head.fingerprint
        self.watches: dict[int, StepWatch] = {}
        self._flight_kept: dict[int, tuple[tuple, FlightItem]] = {}  # flight_items, per step
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
        #: (step, bytes) of the last steps done, for the progress view's rows
        self._recent_done: deque[tuple[StepMove, float]] = deque(maxlen=RECENT_DONE_ROWS)
        self._rate_samples: deque[tuple[float, float]] = deque(maxlen=8)
        #: brokers whose eligible steps the last pick held back for their bytes in flight
        self._held_back: set[int] = set()
        #: brokers whose count cap held an eligible step back in the last pick (None: any finish counts)
        self._blocked: set[int] | None = None
        self._last_check = 0.0
        #: adapts the caps to the ISR health of the moves in flight (None: the caps are fixed)
        self.governor = CapGovernor(limits.max_partition_movements, limits.max_movements_per_broker,
                                    limits.min_movements_per_broker) if limits.adaptive_concurrency else None
        self._min_isr = MinIsrCache()
        #: per-broker rates that follow client traffic (None: the throttle is fixed)
        self.rate_control = rate_control_for(limits, throttle_rate, record_store, run_id)
        self._strategy = parse_strategy(limits.strategy)
        #: when new steps may start; :attr:`paused` (set by the caller from the operator's
        #: pause request) holds them back the same way
        self.windows = parse_windows(limits.maintenance_windows)
        self.paused = False
        self.hold_reason = ""
        self._unload_all()
        self._fresh_counters()

    # -- the loaded pages ---------------------------------------------------------------
    def _unload_all(self) -> None:
        self.steps: dict[int, StepMove] = {}
        self.status: dict[int, str] = {}
        self.next_of: dict[int, int] = {}
        self.prev_of: dict[int, int] = {}
        self.step_bytes: dict[int, float] = {}
        self.chain_left: dict[int, float] = {}
        #: the broker expected to lead each step when it runs (lead steps hand leadership on)
        self.sender: dict[int, int | None] = {}
        self.data: dict[int, tuple[int, ...]] = {}
        self.lane_of: dict[int, tuple[int, ...]] = {}
        self.touched: dict[int, tuple[int, ...]] = {}
        self.page_of: dict[int, int] = {}
        self.pages: dict[int, list[int]] = {}
        self._page_left: dict[int, int] = {}
        self._urp_steps: set[int] = set()
        #: the first page never loaded: the pages from it on hold only queued steps
        self.cursor = 0
        self.lanes_left: dict[int, float] = dict(self.book.head.lane_bytes)
        self.order = OrderContext(self.lanes_left, self.chain_left, self.step_bytes, self.lane_of, self._urp_steps)

    def _fresh_counters(self) -> None:
        """Every step queued, nothing held."""
        self.counts = {QUEUED: self.steps_total, IN_FLIGHT: 0, DONE: 0, DEAD: 0}
        self.broker_load: dict[int, int] = {}
        self.leader_load = 0
        self.done_bytes = 0.0
        self.partitions_done = 0
        self.ready = ReadyQueue(self._strategy, self.order)

    def _load_page(self, k: int, codes: str | Callable[[list[int]], str] | None = None) -> None:
        """Load page ``k``: its steps' tables, their status (``codes``, else all queued), slots and eligibility."""
        entries = self.book.page(k)
        idx = [e.index for e in entries]
        if callable(codes):
            codes = codes(idx)
        codes = codes if codes is not None else QUEUED * len(idx)
        if len(codes) != len(idx):
            raise ValueError(f"the saved state of page {k} has {len(codes)} step(s), the page {len(idx)}")
        last: dict[TopicPartition, int] = {}
        for e, code in zip(entries, codes):
            i, s = e.index, e.step
            self.steps[i], self.status[i], self.page_of[i], self.sender[i] = s, code, k, e.sender
            self.step_bytes[i] = float(s.bytes_to_copy)
            self.data[i] = data_brokers(s, e.sender)
            self.lane_of[i] = step_lanes(s, e.sender)
            # A step occupies a slot on every broker it adds to or removes from, and on the leader
            # it copies from: a leader serving many copies at once splits its throttle among them.
            self.touched[i] = tuple(sorted(set(s.brokers_touched) | set(self.data[i])))
            if e.urp:
                self._urp_steps.add(i)
            self.prev_of[i], self.next_of[i] = last.get(s.key, -1), -1
            if s.key in last:
                self.next_of[last[s.key]] = i
            last[s.key] = i
        for i in reversed(idx):
            nxt = self.next_of[i]
            self.chain_left[i] = self.step_bytes[i] + (self.chain_left[nxt] if nxt >= 0 else 0.0)
        self.pages[k] = idx
        self._page_left[k] = sum(1 for c in codes if c != DONE)
        for i in idx:
            if self.status[i] == IN_FLIGHT:
                self._hold(i, +1)
            elif self.status[i] == QUEUED and (self.prev_of[i] < 0 or self.status[self.prev_of[i]] == DONE):
                self.ready.add(i)

    def _drop_done_pages(self) -> None:
        """Forget the pages whose every step is done: nothing of them is read or saved again."""
        for k in [k for k, n in self._page_left.items() if n == 0]:
            self._unload_page(k)

    def _unload_page(self, k: int) -> None:
        for i in self.pages.pop(k):
            self.ready.discard(i)
            for table in (self.steps, self.status, self.next_of, self.prev_of, self.step_bytes,
                          self.chain_left, self.sender, self.data, self.lane_of, self.touched, self.page_of):
                del table[i]
            self._urp_steps.discard(i)
        del self._page_left[k]

    def fill_frontier(self) -> None:
        """Load pages in admission order until enough steps are eligible for the next refills.

        Enough: twice the cluster cap. At most eight times it is loaded, so a window whose
        eligible steps all wait on full brokers does not read the rest of the plan.
        """
        self._drop_done_pages()
        want = 2 * self.limits.max_partition_movements
        most = 8 * self.limits.max_partition_movements
        while len(self.ready) < want and self.cursor < self.book.head.pages and len(self.steps) < most:
            self._load_page(self.cursor)
            self.cursor += 1

    def status_of(self, i: int) -> str | None:
        """The status code of step ``i`` (None: its page is not loaded)."""
        return self.status.get(i)

    def _hold(self, i: int, d: int) -> None:
        for b in self.touched[i]:
            self.broker_load[b] = self.broker_load.get(b, 0) + d
        if self.steps[i].moves_leader:
            self.leader_load += d

    def _set(self, i: int, code: str) -> None:
        self.counts[self.status[i]] -= 1
        self.counts[code] += 1
        if code == DONE:
            self._page_left[self.page_of[i]] -= 1
        self.status[i] = code

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

    @property
    def broker_rates(self) -> dict[int, float]:
        """Brokers moving at another rate than :attr:`move_rate` (the adaptive throttle's), and that rate."""
        rc = self.rate_control
        return {b: float(r) for b, r in rc.rates.items()} if rc is not None else {}

    def rules_for(self, i: int) -> OutcomeRules:
        """The rules step ``i`` is judged by, naming the throttle its brokers have now (the
        adaptive throttle moves it away from the run's starting rate)."""
        rates = self.broker_rates
        if not rates:
            return self.rules
        brokers = [b for b in (*self.steps[i].adding, self.sender.get(i)) if b is not None]
        if not brokers:
            return self.rules
        return replace(self.rules, throttle_rate=int(min(rates.get(b, self.move_rate) for b in brokers)))

    def flight_items(self) -> dict[int, FlightItem]:
        """The steps in flight as the wake schedule sees them (bytes left as last observed), as
        :meth:`WakeRule.items` gives them; an item is kept until its step is observed again (the
        window and the wake ask for all of them at every refill and wake)."""
        kept, fresh, out = self._flight_kept, {}, {}
        for i, w in self.watches.items():
            seen = (w.bytes_left, w.polled_at, w.submitted_at)
            hit = kept.get(i)
            if hit is None or hit[0] != seen:
                hit = (seen, flight_item(self.lane_of[i], w, float(self.step_bytes[i])))
            fresh[i] = hit
            out[i] = hit[1]
        self._flight_kept = fresh
        return out

    def wake_rule(self, steps: bool = True) -> WakeRule:
        """What the watch needs to schedule its wakes (:mod:`kafka_reassign.execution.wake`).

        :param steps: with the steps in flight (a trigger's); without, for :meth:`flight_items`
        """
        rate = self.move_rate
        watched = self.watches if steps else {}
        return WakeRule(rate=rate, low_water=rate * self.limits.budget_seconds / 2.0,
                        held_back=tuple(sorted(self._held_back)),
                        brokers={i: self.lanes(i) for i in watched},
                        planned={i: self.step_bytes[i] for i in watched}, per_broker=self.broker_rates,
                        urgent=self.urgent_steps())

    def urgent_steps(self) -> frozenset[int] | None:
        """The steps in flight whose finish would let a waiting step start (:attr:`WakeRule.urgent`)."""
        blocked, touched, next_of = self._blocked, self.touched, self.next_of
        if blocked is None:
            return None
        return frozenset(i for i in self.watches if next_of.get(i, -1) != -1 or not blocked.isdisjoint(touched[i]))

    def lanes(self, i: int) -> tuple[int, ...]:
        """The throttle lanes step ``i``'s bytes pass (:func:`~kafka_reassign.execution.wake.throttle_lanes`)."""
        return self.lane_of[i]

    def wake_at(self, now: float) -> tuple[float | None, float | None]:
        """(next cheap check for a step due to finish, when a broker holding steps back runs low)."""
        return self.wake_rule(steps=False).times_of(self.flight_items(), self._last_check, now)

    def admission_closed(self, now: float) -> bool:
        """Whether no new step may start now (paused, or outside every maintenance window); the
        steps in flight are watched as ever. Sets :attr:`hold_reason` for the progress view."""
        if self.paused:
            self.hold_reason = "paused by an operator until resumed (kafka-reassign resume)"
        elif not self.windows.is_open(now):
            opening = self.windows.next_open(now)
            self.hold_reason = ("waiting for the window opening at " + format_instant(opening)
                                if opening is not None else "no maintenance window opens within a year")
        else:
            self.hold_reason = ""
        return bool(self.hold_reason)

    def reopens_at(self, now: float) -> float | None:
        """The next window opening while closed by the windows (None: open, or paused)."""
        if self.paused or self.windows.is_open(now):
            return None
        return self.windows.next_open(now)

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
        for b in self.lane_of[i]:
            self.lanes_left[b] = self.lanes_left.get(b, 0.0) - self.step_bytes[i]
        self._touched_topics.add(self.steps[i].topic)
        self._recent_done.append((self.steps[i], self.step_bytes[i]))
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
        """Compact plain-JSON state of what changes: the counters, a character per step of the
        loaded pages that are not all done, details of the steps in flight or dead. Its size follows
        the window, not the plan."""
        return {"v": 2, "run_id": self.run_id, "fingerprint": self.fingerprint, "cursor": self.cursor,
                "pages": {str(k): "".join(self.status[i] for i in idx)
                          for k, idx in self.pages.items() if self._page_left[k]},
                "counts": dict(self.counts), "done_bytes": self.done_bytes, "partitions_done": self.partitions_done,
                "lanes_left": {str(b): v for b, v in sorted(self.lanes_left.items())},
                "watch": {str(i): w.to_json() for i, w in self.watches.items()},
                "dead": {str(i): [o.value, m] for i, (o, m) in self.dead.items()},
                "dead_moving": sorted(self._dead_moving), "started_at": self.started_at,
                "first_submit_at": self.first_submit_at, "polls": self.polls, "checks": self.checks,
                "leader_changes": self.leader_changes, "submissions": self.submissions,
                "rate": [list(x) for x in self._rate_samples],
                "caps": self.governor.to_json() if self.governor is not None else None,
                "throttle": self.rate_control.to_json() if self.rate_control is not None else None}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_json` of the same steps (raises ValueError for another plan)."""
        fp = self.fingerprint
        if state.get("fingerprint") != fp:
            raise ValueError(f"the saved execution state is for other steps ({state.get('fingerprint')} "
                             f"!= {fp}): it cannot be resumed with this plan")
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
        if self.rate_control is not None and state.get("throttle"):
            self.rate_control.load(state["throttle"])
        self._verify = True
        self._unload_all()
        self._fresh_counters()
        if "status" in state:  # saved by a release that kept a character per step of the plan
            self._load_whole_plan(str(state["status"]))
            return
        for k, codes in sorted((int(k), str(c)) for k, c in state.get("pages", {}).items()):
            self._load_page(k, codes)
        self.cursor = int(state["cursor"])
        self.counts = {c: int(state["counts"][c]) for c in (QUEUED, IN_FLIGHT, DONE, DEAD)}
        self.done_bytes = float(state["done_bytes"])
        self.partitions_done = int(state["partitions_done"])
        if "lanes_left" in state:  # a state saved before lanes keeps the plan's totals: an ordering hint only
            self.lanes_left.clear()  # shared with the strategies' context
            self.lanes_left.update((int(b), float(v)) for b, v in state["lanes_left"].items())

    def _load_whole_plan(self, status: str) -> None:
        """Resume a state with a character per step of the plan: load every page once, count from it."""
        if len(status) != self.steps_total:
            raise ValueError(f"the saved state has {len(status)} step(s), the plan {self.steps_total}")
        for k in range(self.book.head.pages):
            self._load_page(k, lambda idx: "".join(status[i] for i in idx))  # the page is read once
        self.cursor = self.book.head.pages
        self.counts = {c: status.count(c) for c in (QUEUED, IN_FLIGHT, DONE, DEAD)}
        for i, code in self.status.items():
            if code == DONE:
                self.done_bytes += self.step_bytes[i]
                self.partitions_done += self.next_of[i] < 0
                for b in self.lane_of[i]:
                    self.lanes_left[b] -= self.step_bytes[i]
        # The untouched pages after the last one worked on are read again when the window gets there.
        self.cursor = 1 + max((k for k, idx in self.pages.items() if any(self.status[i] != QUEUED for i in idx)),
                              default=-1)
        for k in [k for k in self.pages if k >= self.cursor]:
            self._unload_page(k)

    # -- the trigger's share: watch the steps in flight without the whole plan -------------
    def watch_spec(self) -> dict[str, Any]:
        """Plain JSON for a trigger: the steps in flight, their watches and the rules."""
        return {"steps": {str(i): self.steps[i].to_json() for i in self.watches},
                "watch": {str(i): w.to_json() for i, w in self.watches.items()},
                "rules": self.rules.to_json(), "wake": self.wake_rule().to_json(),
                "throttle_rates": {str(i): self.rules_for(i).throttle_rate for i in self.watches}}

    def merge_watches(self, watch: Mapping[str, Any]) -> None:
        """Take the stall and offline clocks a trigger kept while it watched."""
        for i, w in watch.items():
            if int(i) in self.watches:
                self.watches[int(i)] = StepWatch.from_json(w)
