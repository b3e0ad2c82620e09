"""When the executor next has something to do, so nothing waits out a fixed poll interval.

A throttled copy moves at its share of its brokers' throttles. From the bytes each step in
flight had left at its last observation, that share gives the time it should finish (its
*due* time) and the time each broker runs low on work (its *low-water* time). The watch
(:func:`kafka_reassign.execution.executor.run_execution` and the DAG's trigger) sleeps until the
earliest of:

* halfway to a step's due time (estimates err), then at it: a cheap check (one
  ListPartitionReassignments) says whether it left the listing; a step that did is judged by
  a full poll at once. Only a step whose finish would let a waiting step start brings a check
  forward (see :attr:`WakeRule.urgent`); the others are seen by the next full poll;
* a broker's low-water time, when the window holds eligible steps back only because that
  broker had enough bytes in flight: then the window is refilled before it runs dry;
* the next full poll (``poll_interval_seconds``): sizes, lag, log dirs and stall clocks.

Cheap checks come at most one per :data:`CHECK_GAP_SECONDS`, so the requests a run sends stay
a few per second whatever the plan's size. Shares are estimates (a partition written to, or a
step whose share grows when a neighbour finishes, moves at another rate): a late step is
checked again every gap until the next full poll corrects its bytes left.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from kafka_reassign.execution.outcome import StepWatch

#: Least seconds between two cheap ListPartitionReassignments checks (bounds the request rate).
CHECK_GAP_SECONDS = 1.0


@dataclass(frozen=True)
class FlightItem:
    """One step in flight as the wake schedule sees it.

    :param brokers: the throttle lanes its bytes pass (:func:`throttle_lanes`)
    :param bytes_left: bytes left at ``observed_at``
    :param observed_at: when ``bytes_left`` was read (the submission time before a first poll)
    """

    brokers: tuple[int, ...]
    bytes_left: float
    observed_at: float


def flight_item(lanes: tuple[int, ...], watch: StepWatch, planned: float) -> FlightItem:
    """A step in flight as last observed (its planned bytes and submission time before a first poll)."""
    left = float(watch.bytes_left) if watch.observed else planned
    return FlightItem(lanes, left, watch.polled_at if watch.polled_at is not None else watch.submitted_at)


#: broker -> bytes/s it moves, where it differs from the run's rate (the adaptive throttle)
BrokerRates = Mapping[int, float]


def throttle_lanes(brokers: Sequence[int], copies: bool) -> tuple[int, ...]:
    """The throttles a step's bytes pass, as *lanes*: the sender's outbound one as ``~broker``
    (negative), each receiver's inbound one as the broker id.

    Kafka throttles a broker's leader side (what it sends to followers) and its follower side
    (what it fetches) with two separate quotas, so a broker sending one copy and receiving
    another moves both at full rate: counting them as one resource halved its share and held
    a sender's inbound work back behind its outbound.

    :param brokers: the sender first, then the receivers (:func:`~kafka_reassign.execution.book.data_brokers`)
    :param copies: the step copies between brokers (False: a log-dir move, inside each broker)
    """
    if not copies or not brokers:
        return tuple(brokers)
    return (~brokers[0], *brokers[1:])


def lane_broker(lane: int) -> int:
    """The broker of a lane of :func:`throttle_lanes`."""
    return lane if lane >= 0 else ~lane


def step_rates(items: Mapping[int, FlightItem], rate: float, per_broker: BrokerRates | None = None
               ) -> dict[int, float]:
    """Each step's expected bytes/s: the smallest share of its brokers' rates among them.

    :param rate: bytes/s one broker moves (its replication throttle, or its NIC when unthrottled)
    :param per_broker: brokers moving at another rate
    """
    sharing: dict[int, int] = {}
    for it in items.values():
        for b in it.brokers:
            sharing[b] = sharing.get(b, 0) + 1
    of = per_broker or {}
    share = {b: of.get(lane_broker(b), rate) / n for b, n in sharing.items()}.__getitem__
    return {i: min(map(share, it.brokers)) if it.brokers else rate for i, it in items.items()}


def lane_sending(items: Mapping[int, FlightItem], rate: float, per_broker: BrokerRates | None = None
                 ) -> dict[int, float]:
    """Lane -> bytes/s its steps in flight move through it, shared max-min fairly (what a step
    does not get at its busiest lane goes to the others on its other lanes): below the lane's
    rate when all its steps are held back by busier lanes at their other end."""
    rates = max_min_rates(items, rate, per_broker)
    out: dict[int, float] = {}
    for i, it in items.items():
        for b in it.brokers:
            out[b] = out.get(b, 0.0) + rates[i]
    return out


def max_min_rates(items: Mapping[int, FlightItem], rate: float, per_broker: BrokerRates | None = None
                  ) -> dict[int, float]:
    """Each step's max-min fair rate over its lanes (progressive filling: the lane with the least
    share per step fixes its steps at that share, and gives the rest of their lanes what is left)."""
    of = per_broker or {}
    on: dict[int, set[int]] = {}
    for i, it in items.items():
        for b in it.brokers:
            on.setdefault(b, set()).add(i)
    cap = {b: of.get(lane_broker(b), rate) for b in on}
    version = dict.fromkeys(on, 0)  # a lane's entry in the heap is current only at its version
    heap = [(cap[b] / len(steps), b, 0) for b, steps in on.items()]
    heapq.heapify(heap)
    out = {i: rate for i, it in items.items() if not it.brokers}
    while heap:
        share, b, v = heapq.heappop(heap)
        if b not in on or v != version[b]:
            continue  # stale: the lane lost steps or capacity since it was pushed
        for i in list(on[b]):
            out[i] = share
            for k in items[i].brokers:
                on[k].discard(i)
                cap[k] = max(0.0, cap[k] - share)
                if k != b and on[k]:
                    version[k] += 1
                    heapq.heappush(heap, (cap[k] / len(on[k]), k, version[k]))
        del on[b]
    return out


def bytes_left_now(items: Mapping[int, FlightItem], rate: float, now: float,
                   per_broker: BrokerRates | None = None, rates: Mapping[int, float] | None = None
                   ) -> dict[int, float]:
    """Each step's bytes left now, projected from its last observation at its expected rate
    (``rates``: :func:`step_rates` of these items, when already known)."""
    rates = step_rates(items, rate, per_broker) if rates is None else rates
    return {i: max(0.0, it.bytes_left - rates[i] * max(0.0, now - it.observed_at)) for i, it in items.items()}


def due_times(items: Mapping[int, FlightItem], rate: float, per_broker: BrokerRates | None = None,
              rates: Mapping[int, float] | None = None) -> dict[int, float]:
    """Step index -> unix time it should finish at its expected rate (``rates``: as :func:`bytes_left_now`)."""
    rates = step_rates(items, rate, per_broker) if rates is None else rates
    return {i: it.observed_at + (it.bytes_left / rates[i] if rates[i] > 0 else math.inf)
            for i, it in items.items()}


def lane_left(items: Mapping[int, FlightItem], rate: float, now: float,
              per_broker: BrokerRates | None = None, rates: Mapping[int, float] | None = None) -> dict[int, float]:
    """Lane -> bytes the steps in flight still move through it (projected to ``now``; ``rates``: as
    :func:`bytes_left_now`)."""
    left = bytes_left_now(items, rate, now, per_broker, rates)
    out: dict[int, float] = {}
    for i, it in items.items():
        for b in it.brokers:
            out[b] = out.get(b, 0.0) + left[i]
    return out


def low_water_time(left: Mapping[int, float], brokers: Iterable[int], rate: float, low_water: float,
                   now: float, per_broker: BrokerRates | None = None) -> float | None:
    """When the first of ``brokers`` (lanes) gets down to its low water (None: no lane).

    A lane drains at its broker's rate while it has work, whatever the number of steps sharing
    it; its low water is ``low_water`` scaled by that rate over ``rate`` (the same seconds of work).
    """
    of = {b: of_rate for b in brokers if (of_rate := (per_broker or {}).get(lane_broker(b), rate)) > 0}
    times = [now + max(0.0, left.get(b, 0.0) - low_water * r / rate) / r for b, r in of.items()] if rate > 0 else []
    return min(times, default=None)


def next_check(due: Sequence[float], last_check: float, now: float) -> float | None:
    """When the next cheap check is worth making, never within a gap of the last.

    Halfway to the earliest due time: an estimate twice too slow (a share that grew, a cluster
    faster than its throttle says) costs a few more checks, not a step's worth of idle time;
    once due, every gap until it leaves the listing.
    """
    if not due:
        return None
    earliest = min(due)
    return max(now + max(0.0, earliest - now) / 2.0, last_check + CHECK_GAP_SECONDS, now)


@dataclass(frozen=True)
class WakeRule:
    """What the watch needs to schedule its wakes (plain JSON for a trigger).

    :param rate: bytes/s one broker moves
    :param low_water: bytes in flight below which a held-back broker should get more work
    :param held_back: lanes the window held eligible steps back from for their bytes in flight
    :param brokers: step index -> the throttle lanes its bytes pass (:func:`throttle_lanes`)
    :param planned: step index -> its planned bytes (bytes left before a first observation)
    :param per_broker: brokers moving at another rate than ``rate`` (the adaptive throttle)
    :param urgent: the steps whose finish would let a waiting step start (a partition's next
        step, or one on a broker whose count cap held an eligible step back); None: every step
        (the cluster or leader cap held an admissible step back, or nothing waits)
    """

    rate: float
    low_water: float
    held_back: tuple[int, ...] = ()
    brokers: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    planned: Mapping[int, float] = field(default_factory=dict)
    per_broker: BrokerRates = field(default_factory=dict)
    urgent: frozenset[int] | None = None

    def items(self, watches: Mapping[int, StepWatch]) -> dict[int, FlightItem]:
        """The steps in flight of ``watches`` with their bytes left as last observed."""
        return {i: flight_item(tuple(self.brokers.get(i, ())), w, float(self.planned.get(i, 0.0)))
                for i, w in watches.items()}

    def times(self, watches: Mapping[int, StepWatch], last_check: float, now: float
              ) -> tuple[float | None, float | None]:
        """(next cheap check for a step due to finish, when a held-back broker runs low)."""
        return self.times_of(self.items(watches), last_check, now)

    def times_of(self, items: Mapping[int, FlightItem], last_check: float, now: float
                 ) -> tuple[float | None, float | None]:
        """:meth:`times` of the steps in flight as :meth:`items` gives them."""
        rates = step_rates(items, self.rate, self.per_broker)  # once: both times need them
        due = due_times(items, self.rate, self.per_broker, rates)
        # A finish that frees nothing a waiting step needs can wait for the full poll: among
        # thousands in flight some step is always due, and each check that finds one refills.
        urgent = self.urgent
        check = next_check([t for i, t in due.items() if urgent is None or i in urgent], last_check, now)
        refill = None
        if self.held_back:
            refill = low_water_time(lane_left(items, self.rate, now, self.per_broker, rates), self.held_back,
                                    self.rate, self.low_water, now, self.per_broker)
        return check, refill

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate, "low_water": self.low_water, "held_back": list(self.held_back),
                "brokers": {str(i): list(b) for i, b in self.brokers.items()},
                "planned": {str(i): n for i, n in self.planned.items()},
                "per_broker": {str(b): r for b, r in self.per_broker.items()},
                "urgent": None if self.urgent is None else sorted(self.urgent)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "WakeRule":
        return cls(rate=float(d["rate"]), low_water=float(d["low_water"]),
                   held_back=tuple(int(b) for b in d.get("held_back", ())),
                   brokers={int(i): tuple(int(x) for x in b) for i, b in d.get("brokers", {}).items()},
                   planned={int(i): float(n) for i, n in d.get("planned", {}).items()},
                   per_broker={int(b): float(r) for b, r in d.get("per_broker", {}).items()},
                   urgent=None if d.get("urgent") is None else frozenset(int(i) for i in d["urgent"]))
