"""A plan kept across an event that changed no partition equals the plan made afresh.

After an event that only moved a quota meter (a sample purge at the bound, a mode flip), the
physics keeps the flows' rates when every capacity is unchanged and asks only the due quotas
for their next event (replication_flows._refreshed); every other event plans from scratch.
"""
from __future__ import annotations

import math

import pytest

from kafka_sim import errors as E
from kafka_sim.replication import Replication

from test_sim_model_helpers import GB, MB, manual, snapshot, topic

SET = 0


def _moving_cluster():
    """Throttled moves beside in-sync traffic (quotas at their bound) and a throttled KIP-113 copy."""
    m = manual(snapshot(brokers=6, topics=[
        topic("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2]], size=GB // 4, bytes_in=1 * MB),
        topic("u", [[2, 1, 3]], size=GB // 8)]))
    for b in range(1, 7):
        ops = [("leader.replication.throttled.rate", SET, str(6 * MB)),
               ("follower.replication.throttled.rate", SET, str(5 * MB)),
               ("replica.alter.log.dirs.io.max.bytes.per.second", SET, str(20 * MB))]
        assert m.incremental_alter_configs(4, str(b), ops) == (E.NONE, None)
    for name in ("t", "u"):
        ops = [("leader.replication.throttled.replicas", SET, "*"),
               ("follower.replication.throttled.replicas", SET, "*")]
        assert m.incremental_alter_configs(2, name, ops) == (E.NONE, None)
    m.advance_by(15)  # the quotas' windows hold the in-sync traffic
    moves = [("t", 0, [4, 2, 3]), ("t", 1, [5, 3, 1]), ("t", 2, [6, 1, 2]), ("t", 3, [4, 5, 2]),
             ("u", 0, [4, 1, 3])]
    assert all(err == E.NONE for *_r, err, _m in m.alter_reassignments(moves))
    assert m.alter_replica_log_dirs(2, [("/d2", "t", 1)]) == [("t", 1, E.NONE)]
    return m


def test_a_refreshed_plan_has_the_rates_and_next_event_of_a_fresh_one(monkeypatch):
    kept = Replication._refreshed
    checked = []

    def refreshed_and_compared(self, plan):
        out = kept(self, plan)
        if out is not None:
            flows, event, _lagging, _k = out
            rates = [f.rate for f in flows]
            fresh_flows, fresh_event, _l, _k2 = self._make_plan()
            assert [f.replica for f in fresh_flows] == [f.replica for f in flows]
            assert [f.rate for f in fresh_flows] == rates  # the same sharing: bit for bit
            assert math.isclose(fresh_event, event, rel_tol=1e-12, abs_tol=1e-9)
            checked.append(self._t)
        return out

    monkeypatch.setattr(Replication, "_refreshed", refreshed_and_compared)
    m = _moving_cluster()
    m.advance_by(400)
    assert len(checked) > 10  # quota events that changed no partition kept their plan


def test_keeping_plans_leaves_the_moves_as_planning_every_event_does(monkeypatch):
    m = _moving_cluster()
    m.advance_by(400)
    kept = {(p.topic, p.index): (list(p.replicas), list(p.isr)) for t in m.topics.values() for p in t.partitions}
    monkeypatch.setattr(Replication, "_refreshed", lambda self, plan: None)  # plan afresh at every event
    fresh = _moving_cluster()
    fresh.advance_by(400)
    assert fresh.sim_time() == pytest.approx(m.sim_time())
    assert {(p.topic, p.index): (list(p.replicas), list(p.isr))
            for t in fresh.topics.values() for p in t.partitions} == kept
    for name, index in (("t", 0), ("t", 3), ("u", 0)):
        a, b = m.partition_state(name, index), fresh.partition_state(name, index)
        assert a["sizes"] == pytest.approx(b["sizes"], rel=1e-9)
