"""Calibration headline: the simulator times a throttled move like Apache Kafka 4.3.1 does.

One 20 MB partition moves [1,2,3] -> [4,2,3] under a 2 MB/s throttle while an acks=all
producer writes it at R/6: the two in-sync followers' fetches fill the leader's quota
(KafkaApis records them), so the new replica is paced at R - 2P once the window is spent.
The same scenario runs on the real cluster and on a SimulatedCluster of the same shape
through the same code (benchmarks/calibration.py), side by side; the two moving times must
agree within 15%. Every throttle config the run sets is removed again by the scenario
runner (the autouse check of conftest.py reads them back through confluent-kafka).
"""
from __future__ import annotations

from benchmarks import calibration as cal

TOLERANCE = 0.15


def test_simulated_move_with_in_sync_producer_times_like_real_kafka(local_kafka, topic_name):
    sc = next(s for s in cal.scenarios() if s.name.endswith("producer R/6"))
    topic = topic_name("calibration")
    # One side after the other: the simulator's Python threads and the real cluster's JVMs
    # would otherwise share the machine's cores during both timings.
    real = cal.on_real(local_kafka.bootstrap_servers, sc, topic)
    sim = cal.on_simulator(sc)
    print(f"{sc.name}: real Kafka {real} s, simulator {sim} s")
    assert real is not None and sim is not None, f"a move stalled: real {real}, simulator {sim}"
    assert abs(sim - real) / real <= TOLERANCE, (
        f"simulator {sim:.1f} s vs real Kafka {real:.1f} s: {100 * (sim - real) / real:+.0f}%")
