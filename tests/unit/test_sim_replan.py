"""Re-plans that keep what an event did not change give the physics' answer (issue 22).

Between events most quota meters keep their course, and the model keeps the next event it
found for each (replication_quotas._quota_event) instead of sweeping the window again. The
kept answers differ from recomputed ones only by rounding: the scenario of
test_sim_determinism (throttled moves under load, submitted as others finish) run both ways
finishes every move at the same time and holds the same bytes at every step, to 1e-9.
"""
from __future__ import annotations

import pytest

from kafka_sim.quotas import QuotaMeter

from test_sim_determinism import trace


def _counting_crossings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    cross_at = QuotaMeter.cross_at

    def counted(self: QuotaMeter, now: float, bound: float, level: float, breaks: int | None = None) -> float:
        calls[0] += 1
        return cross_at(self, now, bound, level, breaks)

    monkeypatch.setattr(QuotaMeter, "cross_at", counted)
    return calls


def _floats(state: str) -> list[float]:
    return [float(x) for x in state.replace("(", " ").replace(")", " ").replace("[", " ").replace("]", " ")
            .replace(",", " ").split() if x[0].isdigit() and "." in x]


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_kept_events_match_a_full_replan(seed, monkeypatch):
    calls = _counting_crossings(monkeypatch)
    full = trace(seed, replan_all=True)
    swept = calls[0]
    kept = trace(seed)
    assert calls[0] - swept < swept  # kept answers were used
    assert [f[:2] for f in kept["finished"]] == [f[:2] for f in full["finished"]]
    for (_t, _p, a), (_t2, _p2, b) in zip(kept["finished"], full["finished"]):
        assert a == pytest.approx(b, rel=1e-9)
    assert len(kept["states"]) == len(full["states"])
    for a, b in zip(kept["states"], full["states"]):
        for sa, sb in zip(a, b):
            assert _floats(sa) == pytest.approx(_floats(sb), rel=1e-9, abs=1e-3)
