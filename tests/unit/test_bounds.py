"""The fixed-leader and source-free bounds (kafka_reassign.planning.bounds) against brute force."""
from __future__ import annotations

import itertools
import math
import random
import time

import pytest

from kafka_reassign.cluster.state import BrokerInfo, ClusterState, PartitionInfo, TopicInfo
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.planning.bounds import (Copy, UniformLimits, partition_copy, source_free_bound,
                                            throttle_bound)
from kafka_reassign.planning.estimate import Estimate, Limits, step_loads
from kafka_reassign.planning.plan_estimate import PlannedMove, estimate_plan
from kafka_reassign.units import format_duration

MB = 1_000_000


def random_copies(rng: random.Random, brokers: int, steps: int) -> list[Copy]:
    """Small instances: 1-3 candidate senders, 1-2 new replicas, sizes in whole MB."""
    out = []
    for _ in range(steps):
        sources = tuple(rng.sample(range(1, brokers + 1), rng.randint(1, 3)))
        others = [b for b in range(1, brokers + 1) if b not in sources]
        adding = tuple(rng.sample(others, min(len(others), rng.randint(1, 2))))
        out.append(Copy(leader=sources[0], adding=adding, size_bytes=rng.randint(1, 9) * MB, sources=sources))
    return out


def inbound_seconds(copies: list[Copy], rate: dict[int, float]) -> float:
    moved: dict[int, float] = {}
    for c in copies:
        for b in c.adding:
            moved[b] = moved.get(b, 0.0) + c.size_bytes
    return max((n / rate[b] for b, n in moved.items()), default=0.0)


def hall_seconds(copies: list[Copy], rate: dict[int, float]) -> float:
    """max over broker sets S of (bytes only S may send) / (S's summed rate), by enumerating every S."""
    brokers = sorted(rate)
    best = 0.0
    for k in range(1, len(brokers) + 1):
        for subset in itertools.combinations(brokers, k):
            only = sum(c.size_bytes * len(c.adding) for c in copies if set(c.sources) <= set(subset))
            best = max(best, only / sum(rate[b] for b in subset))
    return max(best, inbound_seconds(copies, rate))


def split_seconds(copies: list[Copy], rate: dict[int, float], pieces: int) -> float:
    """Best schedule when each copy is cut into ``pieces`` equal parts, each sent whole by one sender."""
    parts = [(c.sources, c.size_bytes * len(c.adding) / pieces) for c in copies for _ in range(pieces)]
    best = math.inf
    for choice in itertools.product(*[src for src, _ in parts]):
        sent: dict[int, float] = {}
        for b, (_, size) in zip(choice, parts):
            sent[b] = sent.get(b, 0.0) + size
        best = min(best, max(n / rate[b] for b, n in sent.items()))
    return max(best, inbound_seconds(copies, rate))


@pytest.mark.parametrize("seed", range(40))
def test_source_free_bound_equals_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    brokers = rng.randint(3, 5)
    copies = random_copies(rng, brokers, rng.randint(2, 5))
    rates = {b: 10.0 * MB for b in range(1, brokers + 1)}
    got = source_free_bound(copies, UniformLimits(10 * MB))
    assert got.seconds == pytest.approx(hall_seconds(copies, rates), rel=1e-9)
    whole = split_seconds(copies, rates, 1)  # integer source choices
    halves = split_seconds(copies, rates, 2)
    assert got.seconds <= halves * (1 + 1e-9) and halves <= whole * (1 + 1e-9)
    assert got.seconds <= throttle_bound(copies, UniformLimits(10 * MB)).seconds * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_unequal_throttles_respected(seed: int) -> None:
    """Per-broker throttles and network caps: Hall's ratio with each set's summed rate."""
    rng = random.Random(100 + seed)
    brokers = rng.randint(3, 5)
    copies = random_copies(rng, brokers, rng.randint(2, 6))
    limits = Limits(rate=10 * MB, broker_rates={1: 4 * MB, 3: 25 * MB}, network={2: 6 * MB})
    rates = {b: min(limits.throttle(b), limits.capacity(b)) for b in range(1, brokers + 1)}
    got = source_free_bound(copies, limits)
    assert got.seconds == pytest.approx(hall_seconds(copies, rates), rel=1e-9)
    assert got.seconds <= split_seconds(copies, rates, 1) * (1 + 1e-9)
    assert got.seconds <= throttle_bound(copies, limits).seconds * (1 + 1e-9)


def test_what_sets_each_bound() -> None:
    # Broker 1 leads both copies; 2 and 3 hold in-sync replicas of one each.
    copies = [Copy(leader=1, adding=(4,), size_bytes=60 * MB, sources=(1, 2)),
              Copy(leader=1, adding=(5,), size_bytes=60 * MB, sources=(1, 3)),
              Copy(leader=1, adding=(6,), size_bytes=30 * MB, sources=(1,))]
    fixed = throttle_bound(copies, UniformLimits(10 * MB))
    free = source_free_bound(copies, UniformLimits(10 * MB))
    assert (fixed.seconds, fixed.broker, fixed.side) == (pytest.approx(15.0), 1, "out")
    # 150 MB over brokers 1-3 at 10 MB/s each, broker 1 also alone for 30 MB: 5 s; inbound 6 s.
    assert (free.seconds, free.broker, free.side) == (pytest.approx(6.0), 4, "in")
    slow = Limits(rate=10 * MB, broker_rates={2: 1 * MB, 3: 1 * MB})
    only = source_free_bound(copies, slow)
    assert only.side == "out" and only.brokers == (1, 2, 3) and only.seconds == pytest.approx(150 / 12)
    assert "brokers 1, 2, 3 out" in only.describe()


def test_edge_cases() -> None:
    assert source_free_bound([], UniformLimits(MB)) == throttle_bound([], UniformLimits(MB))
    copy = Copy(leader=1, adding=(2,), size_bytes=10 * MB, sources=(1, 3))
    dead = source_free_bound([copy], Limits(rate=MB, broker_rates={1: 0.0, 3: 0.0}))
    assert math.isinf(dead.seconds) and dead.side == "out"
    # One sender at 0 B/s and one left: the copy finishes through the other.
    half = source_free_bound([copy], Limits(rate=MB, broker_rates={1: 0.0}))
    assert half.seconds == pytest.approx(10.0)
    # An unthrottled sender costs no time; the receiver's inbound still does.
    free = source_free_bound([copy], Limits(rate=MB, broker_rates={3: math.inf}, network={3: math.inf}))
    assert free.seconds == pytest.approx(10.0) and free.side == "in"
    # Without an ISR every current replica may send; with one, only its members.
    assert partition_copy((1, 2, 3), (4, 2, 3), 5, leader=1).sources == (1, 2, 3)
    assert partition_copy((1, 2, 3), (4, 2, 3), 5, leader=1, isr=[1, 3]) == Copy(1, (4,), 5, (1, 3))


def test_step_chain_sources() -> None:
    """A partition's later step may copy from a replica an earlier step added; out-of-sync ones never send."""
    info = PartitionInfo(topic="t", partition=0, replicas=(1, 2, 3), isr=(1, 2), leader=1, size_bytes=10 * MB)
    state = ClusterState(brokers={b: BrokerInfo(id=b) for b in range(1, 7)},
                         topics={"t": TopicInfo(name="t", partitions={0: info})})
    steps = [StepMove("t", 0, (1, 2, 3), (4, 1, 2, 3), size_bytes=10 * MB),
             StepMove("t", 0, (4, 1, 2, 3), (4, 5, 1, 2, 3), size_bytes=10 * MB)]
    first, second = step_loads(steps, state)
    assert first.sources == (1, 2) and second.sources == (4, 1, 2)


def decommission_moves() -> list[PlannedMove]:
    """Broker 8 leaves: one 600 MB partition on it per pair of brokers 1-7 (21), leading every third.

    Its replica goes to the least-loaded broker not in the partition, so brokers 1-7 receive
    3 copies each, while the fixed leader 8 would send 7.
    """
    moves, received = [], {b: 0 for b in range(1, 8)}
    for p, (a, b) in enumerate(itertools.combinations(range(1, 8), 2)):
        current = [(8, a, b), (a, 8, b), (a, b, 8)][p % 3]
        new = min((c for c in received if c not in (a, b)), key=lambda c: (received[c], c))
        received[new] += 1
        moves.append(PlannedMove(topic="t", partition=p, current=current,
                                 target=tuple(new if r == 8 else r for r in current), size_bytes=600 * MB,
                                 leader=current[0]))
    return moves


def test_decommission_source_free_bound_well_below_fixed_leader() -> None:
    moves = decommission_moves()
    assert sum(1 for m in moves if m.leader == 8) * 3 == len(moves)
    est, _ = estimate_plan(moves, rate=10 * MB)
    assert est.source_free_seconds is not None
    print(f"\ndecommission of broker 8 (21 partitions x 600 MB, leads 7): fixed-leader bound "
          f"{format_duration(est.bound_seconds)} (broker {est.busiest_broker}), source-free bound "
          f"{format_duration(est.source_free_seconds)}\n{est.describe()}")
    assert est.busiest_broker == 8
    assert est.source_free_seconds <= 0.8 * est.bound_seconds
    assert "the fixed-leader bound" in est.describe() and "source-free bound" in est.describe()
    again = Estimate.from_json(est.to_json())
    assert again.source_free_seconds == pytest.approx(est.source_free_seconds)
    older = {k: v for k, v in est.to_json().items() if k != "source_free_seconds"}
    assert Estimate.from_json(older).source_free_seconds is None
    assert "source-free" not in Estimate.from_json(older).describe()


def test_100k_steps_on_300_brokers() -> None:
    """Plan-sized input: 100k steps, 300 brokers, 20 of them sole senders for a tenth of the bytes."""
    rng = random.Random(7)
    copies = []
    for _ in range(100_000):
        sources = tuple(rng.sample(range(1, 21), 2) if rng.random() < 0.1 else rng.sample(range(1, 301), 3))
        adding = next(b for b in iter(lambda: rng.randint(1, 300), None) if b not in sources)
        copies.append(Copy(leader=sources[0], adding=(adding,), size_bytes=int(rng.lognormvariate(18, 1)),
                           sources=sources))
    t0 = time.process_time()
    free = source_free_bound(copies, UniformLimits(10 * MB))
    took = time.process_time() - t0
    fixed = throttle_bound(copies, UniformLimits(10 * MB))
    print(f"\n100k steps on 300 brokers: source-free bound {free.seconds:.0f} s {free.describe()} in {took:.2f} s CPU;"
          f" fixed-leader {fixed.seconds:.0f} s")
    assert 0 < free.seconds <= fixed.seconds
    assert free.side == "out" and set(free.brokers) <= set(range(1, 21))
