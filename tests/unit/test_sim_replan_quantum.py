"""The simulator's re-plan quantum: copies keep their rates for a while after another catches up."""
from __future__ import annotations

import pytest

from kafka_sim import errors as E

from test_sim_model_helpers import MB, manual, snapshot, topic

SET = 0
THROTTLE = 20 * MB


def _moves(quantum: float, bytes_in: float = 100_000.0):
    """Twelve throttled copies of uneven sizes out of brokers 1-3 into 4-6; (model, finish times)."""
    replicas = [[1 + i % 3, 1 + (i + 1) % 3] for i in range(12)]
    topics = [topic(f"t{i}", [r], size=(5 + 5 * i) * MB, bytes_in=bytes_in) for i, r in enumerate(replicas)]
    m = manual(snapshot(topics=topics))
    m.replan_quantum = quantum
    for b in range(1, 7):
        assert m.incremental_alter_configs(4, str(b), [("leader.replication.throttled.rate", SET, str(THROTTLE)),
                                                       ("follower.replication.throttled.rate", SET, str(THROTTLE))]
                                           ) == (E.NONE, None)
    for i in range(12):
        assert m.incremental_alter_configs(2, f"t{i}", [("leader.replication.throttled.replicas", SET, "*"),
                                                        ("follower.replication.throttled.replicas", SET, "*")]
                                           ) == (E.NONE, None)
    targets = [(f"t{i}", 0, [r[0], 4 + i % 3]) for i, r in enumerate(replicas)]
    assert all(code == E.NONE for _t, _p, code, _m in m.alter_reassignments(targets))
    finished: dict[str, float] = {}
    while len(finished) < 12:
        assert m.sim_time() < 1000, finished
        m.advance_by(0.05)
        for t, _p, _r in targets:
            if t not in finished and not m.partition_state(t, 0)["adding"]:
                finished[t] = m.sim_time()
    return m, finished


def test_quantum_zero_plans_at_every_catch_up_and_a_quantum_plans_less():
    exact, _ = _moves(0.0)
    quantum, _ = _moves(1.0)
    assert exact.plans_made >= 12  # each catch-up shares the rates anew
    assert quantum.plans_made < exact.plans_made


@pytest.mark.parametrize("bytes_in", [0.0, 100_000.0])
def test_each_copy_finishes_within_a_quantum_of_the_exact_plans(bytes_in):
    _, exact = _moves(0.0, bytes_in)
    _, kept = _moves(1.0, bytes_in)
    assert set(kept) == set(exact)
    for t, at in exact.items():
        # a copy runs at its last planned rate until the next full plan, within a second
        assert abs(kept[t] - at) <= 1.05, (t, at, kept[t])
    assert max(kept.values()) <= max(exact.values()) * 1.02


def test_kept_rates_never_exceed_a_link():
    """Links are hard caps (no quota window to borrow from): after each catch-up the copies that
    keep their rates must still fit every receiver's and every sender's link."""
    link = 20 * MB
    step = 0.05
    replicas = [[1 + i % 3, 1 + (i + 1) % 3] for i in range(12)]
    topics = [topic(f"t{i}", [r], size=(5 + 5 * i) * MB) for i, r in enumerate(replicas)]
    m = manual(snapshot(topics=topics, network=link))
    m.replan_quantum = 1.0
    targets = [(f"t{i}", 0, [r[0], 4 + i % 3]) for i, r in enumerate(replicas)]
    assert all(code == E.NONE for _t, _p, code, _m in m.alter_reassignments(targets))

    def copied() -> tuple[dict[int, float], dict[int, float]]:
        into: dict[int, float] = {}
        out: dict[int, float] = {}
        for t, _p, target in targets:
            nbytes = m.partition(t, 0).replica(target[1]).exact_bytes()
            into[target[1]] = into.get(target[1], 0.0) + nbytes
            out[target[0]] = out.get(target[0], 0.0) + nbytes
        return into, out

    before = copied()
    finished = 0
    while finished < 12:
        assert m.sim_time() < 100
        m.advance_by(step)
        now = copied()
        for side in (0, 1):
            for b, nbytes in now[side].items():
                assert nbytes - before[side].get(b, 0.0) <= link * step * (1 + 1e-9), (side, b, m.sim_time())
        before = now
        finished = sum(not m.partition_state(t, 0)["adding"] for t, _p, _r in targets)
    assert m.plans_made < 12 + 3  # the quantum patched plans after catch-ups


def test_bytes_read_between_events_are_those_of_the_planned_rates():
    """With a quantum the copies' bytes are integrated when read: a reader between events sees
    what an eager integration gives (the same plans until the first copy catches up)."""
    def sizes(quantum: float) -> list[list[float]]:
        replicas = [[1, 2], [2, 3], [3, 1]]
        topics = [topic(f"t{i}", [r], size=(40 + 20 * i) * MB, bytes_in=50_000.0) for i, r in enumerate(replicas)]
        m = manual(snapshot(topics=topics, network=30 * MB))
        m.replan_quantum = quantum
        m.alter_reassignments([(f"t{i}", 0, [r[0], 4 + i]) for i, r in enumerate(replicas)])
        out = []
        for _ in range(20):
            m.advance_by(0.1)
            out.append([m.partition(f"t{i}", 0).replica(4 + i).exact_bytes() for i in range(3)])
        return out
    eager, lazy = sizes(0.0), sizes(1.0)
    assert eager[-1][0] > 0
    for a, b in zip(eager, lazy):
        assert b == pytest.approx(a, rel=1e-9)


def test_a_quota_that_changes_mode_reshares_its_flows_within_every_capacity():
    """A throttled copy's quotas are spent within a second, then recover with each sample purged:
    with a quantum, such a change re-shares only the flows crossing the quota, and every rate in
    flight still fits every capacity the plan knows (links, quotas) at every step. (A long quantum:
    more changes fall between full plans.)"""
    replicas = [[1 + i % 3, 1 + (i + 1) % 3] for i in range(12)]
    topics = [topic(f"t{i}", [r], size=(100 + 10 * i) * MB) for i, r in enumerate(replicas)]
    m = manual(snapshot(topics=topics, network=30 * MB))
    m.replan_quantum = 5.0
    for b in range(1, 7):
        m.incremental_alter_configs(4, str(b), [("leader.replication.throttled.rate", SET, str(THROTTLE)),
                                                ("follower.replication.throttled.rate", SET, str(THROTTLE))])
    for i in range(12):
        m.incremental_alter_configs(2, f"t{i}", [("leader.replication.throttled.replicas", SET, "*"),
                                                 ("follower.replication.throttled.replicas", SET, "*")])
    reshared = []
    reshare = m._reshared

    def counted(plan):
        out = reshare(plan)
        reshared.append(out is not None)
        return out
    m._reshared = counted
    m.alter_reassignments([(f"t{i}", 0, [r[0], 4 + i % 3]) for i, r in enumerate(replicas)])
    while m.sim_time() < 12.0:
        m.advance_by(0.05)
        if m._plan is None:
            continue
        flows, _event, _lagging, kept = m._plan
        for key, cap in kept.cap.items():
            rid = m._res_ids[key]
            used = sum(f.rate for f in flows if rid in f.rids)
            assert used <= cap * (1 + 1e-9) + 1e-6, (key, used, cap, m.sim_time())
    assert sum(reshared) >= 2, reshared  # spent in the first second, back at its bound after it
