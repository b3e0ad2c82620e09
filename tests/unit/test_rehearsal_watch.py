"""The rehearsal's watch: reads what the model changed, keeps a bounded timeline, sees every ISR change."""
from __future__ import annotations

from kafka_reassign.rehearsal.watch import TIMELINE_POINTS, ClusterWatch

from test_sim_model_helpers import MB, manual, snapshot, topic


def _cluster():
    topics = [topic(f"t{i}", [[1, 2], [2, 3]], size=(20 + 10 * i) * MB) for i in range(3)]
    return manual(snapshot(topics=topics, network=10 * MB))


def test_a_long_watch_keeps_a_bounded_timeline_ending_at_every_copy_made():
    m = _cluster()
    plan = {(f"t{i}", 0) for i in range(3)}
    watch = ClusterWatch(m, plan)
    m.alter_reassignments([(f"t{i}", 0, [4, 2]) for i in range(3)])
    for _ in range(3000):  # far more looks than the timeline keeps
        m.advance_by(0.02)
        watch.observe()
    watch.close()
    assert not m.list_reassignments(None)
    assert len(watch.timeline) <= 4 * TIMELINE_POINTS
    times = [t for t, _b in watch.timeline]
    assert times == sorted(times) and times[0] == 0.0
    assert watch.timeline[-1][1] == sum(m.partition(t, p).log_bytes() for t, p in plan)
    assert watch.moving_seconds() is not None and set(watch.moving_total) == plan
    assert watch.peak[4] == {"in": 3, "out": 0} and watch.peak[1]["out"] == 3


def test_an_isr_change_of_a_partition_not_moving_is_seen():
    """Every change the model makes reaches the watch, moving or not (no rotating sample)."""
    m = _cluster()
    watch = ClusterWatch(m, {("t0", 1), ("t1", 1)})
    watch.observe()
    assert watch.urp_peak == 0 and not watch.risks
    m.stop_broker(3)  # leaves the ISR of the partitions on 2 and 3
    watch.observe()
    assert watch.urp_peak == 2
    assert {r["partition"] for r in watch.risks if "left the ISR" in r["what"]} == {"t0-1", "t1-1"}
    watch.close()
    assert m.touch_journal is None


def test_the_rehearsal_collects_cycles_rarely_and_restores_the_collector_after():
    import gc

    from kafka_reassign.rehearsal.rehearse import sparse_collections

    before = gc.get_threshold()
    try:
        with sparse_collections(young=123_456):
            assert gc.get_threshold()[0] == 123_456
            raise RuntimeError("the rehearsal failed")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
