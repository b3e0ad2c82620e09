"""Benchmark (simulator figure): what the executor's health read costs at 100k moves on 300 brokers.

The health read (``execution/health.read_health``, every 30 s of a run) asks Metadata for the
topics of the steps in flight: Kafka cannot name single partitions, so each topic comes whole.
On the ``new-brokers`` shape of ``benchmarks.execution_scale`` at 100,000 moves / 300 brokers
(334 topics of 500 partitions), 1,250 steps in flight (the default cluster cap) touch almost
every topic. Prints the CPU seconds of one read, client and in-process simulated broker
together (the rehearsal pays both), for the whole topics (``topic_metadata``) and for the
partitions the read needs (``partition_metadata``, what the executor asks since a17fdee).

Run: ``.venv/bin/python -m benchmarks.health_read [--reads N]``.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any, Callable

SHAPE, MOVES, BROKERS, IN_FLIGHT = "new-brokers", 100_000, 300, 1250


def _cpu_per_call(fn: Callable[[], Any], reads: int) -> float:
    fn()  # warm: the simulated broker encodes each topic once, then serves it from its cache
    t0 = time.process_time()
    for _ in range(reads):
        fn()
    return (time.process_time() - t0) / reads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=5, help="reads timed per kind")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    from benchmarks import scale_shapes as S
    from benchmarks.execution_scale import MEDIANS
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_sim import SimulatedCluster

    cluster = S.GENERATORS[SHAPE](BROKERS, MOVES, MEDIANS[SHAPE], 7)
    names = sorted(set(cluster.topics))
    sim = SimulatedCluster(S.snapshot(cluster), time_scale=0.0)
    sim.start()
    try:
        with KafkaAdmin(bootstrap_servers=sim.bootstrap_servers, client_id="health-read-bench") as admin:
            index = {name: -1 for name in names}
            keys = []
            for topic in cluster.topics:  # partition numbers as the shape's snapshot gives them
                index[topic] += 1
                keys.append((topic, index[topic]))
            wanted = random.Random(1).sample(keys, IN_FLIGHT)
            touched = len({t for t, _ in wanted})
            whole = _cpu_per_call(lambda: admin.topic_metadata(sorted({t for t, _ in wanted})), args.reads)
            needed = _cpu_per_call(lambda: admin.partition_metadata(wanted), args.reads)
    finally:
        sim.stop()
    print(f"health read (simulator, in-process): {SHAPE} {MOVES} moves / {BROKERS} brokers, {len(keys)} partitions "
          f"in {len(names)} topics; {IN_FLIGHT} steps in flight touch {touched} topics")
    print(f"  whole topics (topic_metadata): {whole:.3f} CPU s a read; the partitions in flight "
          f"(partition_metadata): {needed:.3f} CPU s; every 30 s that is {needed / 30:.3f} of the moving time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
