"""Health-adaptive concurrency without a cluster: the governor's AIMD, its floor, its JSON, the params."""
from __future__ import annotations

import json

import pytest

from kafka_reassign.errors import ParamError
from kafka_reassign.execution.executor import MoveExecutor
from kafka_reassign.execution.health import RECOVER_AFTER_SECONDS, CapGovernor, Health
from kafka_reassign.execution.limits import ExecutionLimits
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.planning.validate import validate_params

HEALTHY = Health(brokers_touched=6)


def at_min_isr(*partitions: int, replicas: tuple[int, ...] = (1, 2, 3)) -> Health:
    return Health(at_min_isr={("t", p): replicas for p in partitions}, brokers_touched=6)


def test_trouble_halves_the_caps_of_the_brokers_involved_only():
    g = CapGovernor(cluster_cap=100, broker_cap=20, floor=2)
    change = g.observe(at_min_isr(1, 4, 7, 9), now=0.0)
    assert change is not None
    assert change.text.startswith("caps 20->10 per broker (broker(s) 1, 2, 3): 4 partition(s) at min ISR "
                                  "(t-1, t-4, t-7, …)"), change.text
    assert {b: g.cap_of(b) for b in range(1, 7)} == {1: 10, 2: 10, 3: 10, 4: 20, 5: 20, 6: 20}
    # Three of six brokers is not more than half: the cluster cap stays.
    assert g.cluster == 100


def test_widespread_trouble_halves_the_cluster_cap_too():
    g = CapGovernor(cluster_cap=100, broker_cap=20, floor=2)
    change = g.observe(Health(at_min_isr={("t", 0): (1, 2, 3)}, out_of_isr={4: [("u", 1)]}, brokers_touched=6),
                       now=0.0)
    assert g.cluster == 50 and change is not None and "cluster cap 100->50: 4 of 6 brokers" in change.text
    assert "followers on broker(s) 4 left the ISR of 1 partition(s) (u-1)" in change.text


def test_caps_never_shrink_below_the_floor_and_stop_changing_there():
    g = CapGovernor(cluster_cap=100, broker_cap=20, floor=3)
    texts = [c.text for c in (g.observe(at_min_isr(0), now=30.0 * i) for i in range(6)) if c is not None]
    assert [t.split(" (")[0] for t in texts] == ["caps 20->10 per broker", "caps 10->5 per broker",
                                                 "caps 5->3 per broker"]
    assert g.cap_of(1) == 3
    # A cluster cap set below the floor is never raised by a shrink or a resume.
    small = CapGovernor(cluster_cap=1, broker_cap=20, floor=2)
    small.observe(Health(at_min_isr={("t", 0): (1, 2, 3)}, brokers_touched=4), now=0.0)
    assert small.cluster == 1
    small.load({"cluster": 5})
    assert small.cluster == 1


def test_recovery_is_additive_after_a_healthy_interval_back_to_the_configured_caps():
    g = CapGovernor(cluster_cap=100, broker_cap=20, floor=2)
    for i in range(4):
        g.observe(at_min_isr(0), now=30.0 * i)
    assert g.cap_of(1) == 2
    t = 90.0
    assert g.observe(HEALTHY, now=t + RECOVER_AFTER_SECONDS / 2) is None  # not healthy long enough yet
    caps = []
    for k in range(1, 12):
        change = g.observe(HEALTHY, now=t + k * RECOVER_AFTER_SECONDS)
        caps.append(g.cap_of(1))
        if k == 1:
            assert change is not None and change.text == ("caps 2->4 per broker (broker(s) 1, 2, 3): "
                                                          f"healthy for {RECOVER_AFTER_SECONDS:.0f} s")
    assert caps[:3] == [4, 6, 8] and caps[-1] == 20  # +2 (a tenth of 20) per interval, capped
    assert g.brokers == {}
    # New trouble halves again from where it is.
    g.observe(at_min_isr(0, replicas=(5,)), now=10_000.0)
    assert g.cap_of(5) == 10 and g.cap_of(1) == 20


def test_state_round_trips_through_json_and_older_states_load():
    g = CapGovernor(cluster_cap=100, broker_cap=20, floor=2)
    g.observe(Health(at_min_isr={("t", 0): (1, 2, 3)}, out_of_isr={4: [("u", 1)]}, brokers_touched=6), now=5.0)
    again = CapGovernor(cluster_cap=100, broker_cap=20, floor=2)
    again.load(json.loads(json.dumps(g.to_json())))
    assert again.to_json() == g.to_json()
    assert again.cap_of(4) == 10 and again.cluster == 50 and again.last_change == g.last_change
    assert not again.due(20.0) and again.due(35.0)

    steps = [StepMove("t", p, (1, 2, 3), (4, 5, 6), size_bytes=100) for p in range(3)]
    ex = MoveExecutor(steps, ExecutionLimits(max_movements_per_broker=20))
    assert ex.governor is not None
    ex.governor.load(g.to_json())
    saved = json.loads(json.dumps(ex.state_json()))
    resumed = MoveExecutor(steps, ExecutionLimits(max_movements_per_broker=20))
    resumed.load_state(saved)
    assert resumed.reduced_broker_caps == {1: 10, 2: 10, 3: 10, 4: 10} and resumed.partition_cap == 50
    old = {k: v for k, v in saved.items() if k != "caps"}  # saved before adaptive concurrency
    resumed = MoveExecutor(steps, ExecutionLimits(max_movements_per_broker=20))
    resumed.load_state(old)
    assert resumed.reduced_broker_caps == {} and resumed.partition_cap == 1250


def test_lowered_caps_hold_in_the_window_and_show_in_the_progress_line():
    steps = [StepMove("t", p, (1, 2), (1, 3 + p), size_bytes=100) for p in range(10)]
    ex = MoveExecutor(steps, ExecutionLimits(max_movements_per_broker=8, min_movements_per_broker=2))
    assert len(ex.pick()) == 8  # broker 1 copies (leader) or holds every step: 8 at once
    for i in range(8):
        ex._hold(i, -1)
    assert ex.governor is not None
    ex.governor.observe(at_min_isr(0, replicas=(1, 2)), now=0.0)
    assert len(ex.pick()) == 4
    view = ex.progress(0.0)
    assert view.broker_cap == 8 and view.reduced_broker_caps == {"1": 4, "2": 4}
    assert "caps 1250 in cluster, 8 per broker (1: 4, 2: 4); last change: caps 8->4 per broker" in view.summary()
    ex = MoveExecutor(steps, ExecutionLimits(max_movements_per_broker=8, adaptive_concurrency=False))
    assert ex.governor is None and "caps" not in ex.progress(0.0).summary()


def test_a_floor_above_the_per_broker_cap_is_refused_naming_both():
    with pytest.raises(ParamError) as info:
        validate_params({"max_movements_per_broker": 3, "min_movements_per_broker": 5})
    assert "min_movements_per_broker=5 is above max_movements_per_broker=3" in str(info.value)
    with pytest.raises(ParamError, match="min_movements_per_broker"):
        validate_params({"min_movements_per_broker": 0})
    # The default floor under a smaller cap is clamped, not refused (a DAG run carries the default).
    assert validate_params({"max_movements_per_broker": 1, "min_movements_per_broker": 2}).min_movements_per_broker == 1
    assert validate_params({"max_movements_per_broker": 3, "min_movements_per_broker": 5,
                            "adaptive_concurrency": False}).min_movements_per_broker == 3
    limits = ExecutionLimits.from_params(validate_params({"adaptive_concurrency": False,
                                                          "min_movements_per_broker": 4}))
    assert limits.adaptive_concurrency is False and limits.min_movements_per_broker == 4
