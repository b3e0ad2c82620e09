"""A restarted broker's follower quota is a new JVM's sensor: fresh, one sample wide."""
from __future__ import annotations

import pytest

from test_sim_model_helpers import MB, manual, snapshot, topic

SET = 0


def _moving_then_restarted(outage_steps: int) -> tuple[float, float]:
    """20 MB [1,2,3] -> [4,2,3] at 2 MB/s, broker 4 stopped at 3 s for 11 s (in ``outage_steps``
    steps): (bytes broker 4 held when restarted, bytes half a second later)."""
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=20 * MB)]))
    for b in (1, 2, 3, 4):
        m.incremental_alter_configs(4, str(b), [("leader.replication.throttled.rate", SET, str(2 * MB)),
                                                ("follower.replication.throttled.rate", SET, str(2 * MB))])
    m.incremental_alter_configs(2, "t", [("leader.replication.throttled.replicas", SET, "0:1,0:2,0:3"),
                                         ("follower.replication.throttled.replicas", SET, "0:4")])
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    m.advance_by(3)
    m.stop_broker(4)
    for _ in range(outage_steps):
        m.advance_by(11 / outage_steps)
    replica = m.partition("t", 0).replica(4)
    before = replica.exact_bytes()
    m.start_broker(4)
    m.advance_by(0.5)
    return before, replica.exact_bytes()


@pytest.mark.parametrize("outage_steps", [1, 55])
def test_restarted_follower_gets_one_sample_of_the_quota_not_a_window(outage_steps: int):
    # SimpleRate.windowSize of a new sensor is one sample: about 2 MB at once, then 2 MB/s.
    # Before, the dead broker's sensor, idle for a window, allowed 11 samples (22 MB) at once
    # when the outage was stepped finely, and the whole 20 MB move finished on the restart.
    before, after = _moving_then_restarted(outage_steps)
    assert 4 * MB < before < 8 * MB
    assert 0 < after - before < 2.5 * MB
