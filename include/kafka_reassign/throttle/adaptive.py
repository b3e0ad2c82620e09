"""The adaptive throttle's rule: a broker's replication rate follows the room its clients leave.

Each full poll, per broker with moves in flight::

    rate = clamp((capacity - client traffic) * (1 - HYSTERESIS), floor, ceiling)

where client traffic is what the broker's link carries for clients and for in-sync replication:

* produce in: the log growth of the partitions it leads;
* follower bytes in: the log growth of the partitions it follows in sync;
* replication out: the log growth of the partitions it leads, once per in-sync follower;
* consumer fetch: not counted (0). Kafka's admin API has no per-broker bytes-out figure, so
  ``broker_network_capacity_bytes_per_sec`` should be the link's capacity less the peak
  consumer traffic.

Log growth is read from the sizes DescribeLogDirs reports (the poll reads them anyway). A new
replica being copied is left out: its growth is the throttled copy itself. A log that shrank
(retention deleted a segment) counts as no growth for that interval.

Client traffic rising from one poll to the next is projected one poll ahead (the rise is added
once), so a rate set now still fits when the next poll comes. The rate aims :data:`HYSTERESIS`
below the room clients leave (capacity - client traffic), so traffic rising by less than that
between polls does not overrun the link and configs are not rewritten every poll. A new rate is
written when the room falls below the rate in force (at once: the link would be overrun), when it
differs from the rate in force by more than :data:`HYSTERESIS`, or when it reaches a bound.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from kafka_reassign.errors import ParamError, Problem
from kafka_reassign.units import format_rate, parse_rate

#: A new rate is written only when it differs from the one in force by more than this share.
HYSTERESIS = 0.10

#: (topic, partition)
Partition = tuple[str, int]


@dataclass(frozen=True)
class RateBounds:
    """The adaptive throttle's settings.

    :param capacity: bytes/s a broker's link carries (one figure for every broker)
    :param floor: the least rate ever set (never below the pre-flight stall point)
    :param ceiling: the greatest rate ever set
    :param per_broker: broker -> its own capacity, where it differs from ``capacity``
    """

    capacity: int
    floor: int
    ceiling: int
    per_broker: Mapping[int, int] | None = None

    def capacity_of(self, broker: int) -> int:
        return int((self.per_broker or {}).get(broker, self.capacity))


def broker_rates(entries: Iterable[str] | None, name: str = "broker_network_capacities") -> dict[int, int]:
    """Broker -> bytes/s from ``BROKER=RATE`` entries (``3=50MB/s``).

    :raises ParamError: naming every malformed entry, rate below 1 KB/s or broker given twice
    """
    out: dict[int, int] = {}
    problems = []
    for entry in entries or ():
        broker, sep, rate = str(entry).partition("=")
        try:
            if not sep or not broker.strip().isdigit():
                raise ValueError("expected BROKER=RATE, e.g. 3=50MB/s")
            b, value = int(broker), parse_rate(rate.strip())
            if value < 1024:
                raise ValueError("a rate must be at least 1 KB/s")
            if b in out:
                raise ValueError(f"broker {b} is given twice")
            out[b] = value
        except ValueError as exc:
            problems.append(Problem(name, f"{entry!r}: {exc}", "bad_param"))
    if problems:
        raise ParamError(problems)
    return out


def adapted_rate(capacity: float, client_traffic: float, floor: int, ceiling: int) -> int:
    """``(capacity - client_traffic) * (1 - HYSTERESIS)`` clamped to ``[floor, ceiling]`` (bytes/s).

    :param capacity: the broker's link, bytes/s
    :param client_traffic: what its clients and in-sync replication use of it, bytes/s
    """
    return int(min(max((capacity - client_traffic) * (1 - HYSTERESIS), floor), ceiling))


def worth_changing(current: int, new: int, room: float, floor: int, ceiling: int) -> bool:
    """Whether ``new`` should replace ``current``: the room clients leave fell below ``current``
    (the link would be overrun), or ``new`` differs by more than :data:`HYSTERESIS`, or it is a
    bound the current rate is not at.

    :param room: capacity - client traffic, bytes/s
    """
    if new == current:
        return False
    return current > room or new in (floor, ceiling) or abs(new - current) > HYSTERESIS * current


def projected(now: Mapping[int, float], before: Mapping[int, float]) -> dict[int, float]:
    """Broker -> client traffic expected at the next poll: a rise since the last one goes on once more.

    :param now: traffic measured at this poll
    :param before: traffic measured at the last one (brokers absent: no projection)
    """
    return {b: t + max(0.0, t - before.get(b, t)) for b, t in now.items()}


@dataclass(frozen=True)
class Hosting:
    """Where a partition lives, as a Metadata read says.

    :param leader: its leader
    :param isr: its in-sync replicas (the leader among them)
    """

    leader: int
    isr: tuple[int, ...]


def partition_sizes(sizes: Mapping[tuple[str, int, int], int],
                    copying: Iterable[tuple[str, int, int]] = ()) -> dict[Partition, int]:
    """(topic, partition) -> its largest replica's size, from DescribeLogDirs sizes.

    :param sizes: (topic, partition, broker) -> bytes
    :param copying: replicas being copied now (their growth is the copy, not client traffic)
    """
    skip = set(copying)
    out: dict[Partition, int] = {}
    for key, size in sizes.items():
        if key not in skip:
            p = (key[0], key[1])
            out[p] = max(out.get(p, 0), int(size))
    return out


def partition_growth(before: Mapping[Partition, int], after: Mapping[Partition, int],
                     seconds: float) -> dict[Partition, float]:
    """(topic, partition) -> bytes/s written to it between two :func:`partition_sizes` reads.

    :param seconds: time between the reads
    """
    if seconds <= 0:
        return {}
    # max(0, ...): a retention delete shrinks a log; that interval counts as no growth
    return {p: max(0.0, (size - before[p]) / seconds) for p, size in after.items() if p in before}


def client_traffic(growth: Mapping[Partition, float], hosting: Mapping[Partition, Hosting],
                   brokers: Iterable[int]) -> dict[int, float]:
    """Broker -> bytes/s of client and in-sync replication traffic on its link (see the module).

    :param growth: from :func:`partition_growth`
    :param hosting: the partitions' leaders and ISRs
    :param brokers: the brokers to report
    """
    wanted = set(brokers)
    out = {b: 0.0 for b in wanted}
    for p, rate in growth.items():
        h = hosting.get(p)
        if h is None or rate <= 0:
            continue
        followers = [b for b in h.isr if b != h.leader]
        if h.leader in wanted:  # produce in, and what it serves its in-sync followers
            out[h.leader] += rate * (1 + len(followers))
        for b in followers:
            if b in wanted:
                out[b] += rate
    return out


@dataclass(frozen=True)
class RateChange:
    """One broker's new rate and why."""

    broker: int
    old: int
    new: int
    client: float
    capacity: int

    @property
    def reason(self) -> str:
        room = self.capacity - self.client
        why = f"client traffic {format_rate(self.client)} of {format_rate(float(self.capacity))}"
        if self.new > room:
            why += f", floor {format_rate(float(self.new))} over the {format_rate(max(0.0, room))} left"
        elif self.old > room:
            why += f", {format_rate(max(0.0, room))} left"
        return why

    @property
    def text(self) -> str:
        verb = "lowered" if self.new < self.old else "raised"
        return (f"broker {self.broker}: throttle {verb} {format_rate(float(self.old))} -> "
                f"{format_rate(float(self.new))} ({self.reason})")


def rate_changes(rates: Mapping[int, int], traffic: Mapping[int, float], bounds: RateBounds) -> list[RateChange]:
    """The brokers whose rate should change, with the new rate (see the module).

    :param rates: broker -> the rate in force
    :param traffic: broker -> client traffic measured (brokers absent keep their rate)
    """
    out = []
    for b, current in sorted(rates.items()):
        if b not in traffic:
            continue
        cap = bounds.capacity_of(b)
        new = adapted_rate(cap, traffic[b], bounds.floor, bounds.ceiling)
        if worth_changing(current, new, cap - traffic[b], bounds.floor, bounds.ceiling):
            out.append(RateChange(b, current, new, traffic[b], cap))
    return out


def floor_over_stall(floor: int, ceiling: int, stall_point: int | None) -> tuple[int, str | None]:
    """(the floor to use, a note when it was raised): never below the pre-flight stall point.

    :param stall_point: the smallest throttle at which no move stalls (None: not known)
    :raises ParamError: the ceiling is below the stall point (every rate would stall a move)
    """
    if stall_point is None or stall_point <= floor:
        return floor, None
    if stall_point > ceiling:
        raise ParamError([Problem(
            "throttle_max_bytes_per_sec",
            f"throttle_max_bytes_per_sec={ceiling} ({format_rate(float(ceiling))}) is below the pre-flight "
            f"stall point {format_rate(float(stall_point))}: moves would never catch up at any rate the "
            "adaptive throttle may set; raise it", "bad_param")])
    note = (f"adaptive throttle: floor raised from {format_rate(float(floor))} to the pre-flight stall point "
            f"{format_rate(float(stall_point))} (below it moves never catch up)")
    return stall_point, note
