"""The simulator's progressive filling (kafka_sim.fairshare.fill) against exact max-min fairness."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from kafka_sim.fairshare import allocate, fill


def _reference(flows: list[tuple[int, ...]], cap: list[float]) -> list[float]:
    """Textbook progressive filling in exact rationals: freeze the flows of the lowest fair level."""
    rates: list[Fraction | None] = [None] * len(flows)
    finite = [r for r, c in enumerate(cap) if not math.isinf(c)]
    while True:
        best: tuple[Fraction, int] | None = None
        for r in finite:
            open_flows = [i for i, res in enumerate(flows) if rates[i] is None and r in res]
            if not open_flows:
                continue
            taken = sum((rates[i] * res.count(r) for i, res in enumerate(flows)  # type: ignore[operator]
                         if rates[i] is not None and r in res), Fraction(0))
            crossings = sum(flows[i].count(r) for i in open_flows)
            level = max(Fraction(0), Fraction(max(0.0, cap[r])) - taken) / crossings
            if best is None or level < best[0]:
                best = (level, r)
        if best is None:
            return [math.inf if x is None else float(x) for x in rates]
        level, r = best
        for i, res in enumerate(flows):
            if rates[i] is None and r in res:
                rates[i] = level


def _instance(rng: random.Random) -> tuple[list[tuple[int, ...]], list[float]]:
    n_res = rng.randint(1, 12)
    cap = [rng.choice([math.inf, 0.0, float(rng.randint(1, 50)), rng.uniform(0.5, 80.0)]) for _ in range(n_res)]
    flows = [tuple(rng.sample(range(n_res), rng.randint(1, min(4, n_res)))) for _ in range(rng.randint(1, 40))]
    return flows, cap


@pytest.mark.parametrize("seed", range(4))
def test_fill_is_max_min_fair_on_random_instances(seed):
    rng = random.Random(seed)
    for _ in range(60):
        flows, cap = _instance(rng)
        got, want = fill(flows, cap), _reference(flows, cap)
        for g, w in zip(got, want):
            assert g == w or math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9), (flows, cap, got, want)


def test_allocate_numbers_keys_as_fill_does():
    rng = random.Random(11)
    for _ in range(50):
        flows, cap = _instance(rng)
        keyed = [tuple(("r", r) for r in res) for res in flows]
        capacity = {("r", r): c for r, c in enumerate(cap) if rng.random() < 0.9 or not math.isinf(c)}
        # bit for bit: the physics numbers its resources itself, other callers pass keys
        assert [x.hex() for x in allocate(keyed, capacity)] == [x.hex() for x in fill(flows, cap)]


def test_unlimited_flow_gets_the_given_rate():
    assert fill([(0,), (1,)], [math.inf, 4.0], unlimited=7.0) == [7.0, 4.0]


def test_resources_no_flow_crosses_do_not_change_the_rates():
    """fill clamps only the capacities of the resources the flows cross (the physics numbers every
    resource of the cluster and re-shares a few flows): the others, even negative or NaN ones,
    leave the rates as they are, to the bit, and a crossed negative capacity still counts as zero."""
    rng = random.Random(12)
    for _ in range(200):
        flows, cap = _instance(rng)
        crossed = {r for res in flows for r in res}
        padded = [c if r in crossed else rng.choice([-3.0, math.nan, 5.0, math.inf]) for r, c in enumerate(cap)]
        padded += [rng.choice([-1.0, 0.0, 7.5, math.inf]) for _ in range(rng.randint(0, 20))]
        assert [x.hex() for x in fill(flows, padded)] == [x.hex() for x in fill(flows, cap)]
    assert fill([(0, 1), (1,)], [-2.0, 6.0, -1.0]) == [0.0, 6.0]
