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

import concurrent.futures

from benchmarks import calibration as cal

TOLERANCE = 0.15


def test_simulated_move_with_in_sync_producer_times_like_real_kafka(local_kafka, topic_name):
    sc = next(s for s in cal.scenarios() if s.name.endswith("producer R/6"))
    topic = topic_name("calibration")
    bootstrap = local_kafka.bootstrap_servers
    # Filled first, in this thread: the clients' lazy imports done once (two threads importing
    # kafka-python's protocol modules at once can deadlock in importlib).
    cal.prepare_real(bootstrap, sc, topic)
    # Both moves at once keep the test short; each is throttle-bound at 2 MB/s, so the
    # shared CPU shifts them by far less than the tolerance.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        simulated = pool.submit(cal.on_simulator, sc)
        real = cal.run_scenario(bootstrap, sc, topic)
        sim = simulated.result(timeout=sc.timeout + 120)
    print(f"{sc.name}: real Kafka {real} s, simulator {sim} s")
    assert real is not None and sim is not None, f"a move stalled: real {real}, simulator {sim}"
    assert abs(sim - real) / real <= TOLERANCE, (
        f"simulator {sim:.1f} s vs real Kafka {real:.1f} s: {100 * (sim - real) / real:+.0f}%")
