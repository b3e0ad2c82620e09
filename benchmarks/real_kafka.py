"""Benchmarks on a real Apache Kafka 4.3.1 cluster (kafka-local): ours against Kafka's own tool, and faults.

Starts its own 6-broker KRaft cluster (3 racks, 2 log dirs each) in a temporary directory and
prints two tables; nothing in them comes from the simulator.

1. *Ours vs Kafka's tool.* One fixed plan (one or two replicas of each of 12 partitions of
   20-60 MB, sizes fixed by a seed) run at a 2 MB/s throttle by ``kafka-reassign execute``
   and, on a fresh copy of the same topic, by Kafka's ``ReassignPartitionsCommand --execute
   --throttle`` with ``--verify`` polled until done. The moving phase is measured from the
   cluster's side (kafka-python's ListPartitionReassignments and metadata every 0.5 s: from
   the first reassignment seen in flight to none in flight with the placement at the target).
   The bound is the busiest broker's bytes in (as a new replica) or out (as the leader)
   divided by the throttle, from the plan and the partitions' sizes on disk. Throttle configs
   left are read back with confluent-kafka (``real_kafka_checks.throttle_configs``) and with
   Kafka's ``ConfigCommand --describe``; a per-broker rate set beforehand by "someone else"
   must come back.
2. *Faults on real Kafka.* One small topic per fault: kill -9 of a receiving broker mid-move
   then restart; another admin deletes our throttle mid-run; another tool's reassignment in
   flight; prior throttles per broker, as the cluster default and ``*`` on the topic.
3. *Leader-aware sourcing.* A decommission where the leaving broker leads 4 of its 10 partitions,
   with ``--leader-sourcing`` off and on, on data written in 1 MB and in 16 KB producer batches:
   the moving time against the fixed-leader and source-free bounds
   (:mod:`benchmarks.real_kafka_sourcing`).

Run: ``make bench`` or ``.venv/bin/python -m benchmarks.run real_kafka`` (6-11 minutes on a
shared 2-core machine, much of it JVMs starting). ``KAFKA_LOCAL_DIR`` reuses a running
``kafka-local up --brokers 6 --racks 3 --log-dirs 2`` cluster while developing.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from benchmarks.real_kafka_cluster import LOG_DIRS, RACKS, ROOT, Bench, start_cluster
from benchmarks.real_kafka_compare import SEED, THROTTLE, compare_tools, print_compare
from benchmarks.real_kafka_faults import print_faults, run_faults
from benchmarks.real_kafka_sourcing import THROTTLE as SOURCING_THROTTLE
from benchmarks.real_kafka_sourcing import print_sourcing, run_sourcing


def main(argv: list[str] | None = None) -> int:
    """Start a real cluster, print both tables, stop it."""
    sys.path.insert(0, str(ROOT / "tests" / "real_kafka"))  # real_kafka_checks: the independent read-backs
    import logging
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    # `python -m benchmarks.real_kafka compare|faults|sourcing` runs one table; benchmarks.run's own argv is ignored.
    only = {a for a in (argv if argv is not None else sys.argv[1:]) if a in ("compare", "faults", "sourcing")}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-real-kafka-") as tmp:
        cluster, owned = start_cluster(Path(tmp))
        try:
            bench = Bench(cluster, cluster.bootstrap_servers, Path(tmp))
            print(f"real Apache Kafka 4.3.1, {len(cluster.brokers)} brokers, {RACKS} racks, {LOG_DIRS} log dirs "
                  f"(kafka-local, up in {time.monotonic() - t0:.0f} s)", flush=True)
            if not only or "compare" in only:
                print(f"Ours vs Kafka's tool: one plan, 12 partitions of 20-60 MB (seed {SEED}), RF 3, "
                      f"throttle {THROTTLE / 1e6:g} MB/s; moving phase from the cluster's side (0.5 s samples):",
                      flush=True)
                print_compare(compare_tools(bench))
            if not only or "faults" in only:
                print("Faults on real Kafka (one small topic each, 1 MB/s, --poll-interval-seconds 2):", flush=True)
                print_faults(run_faults(bench))
            if not only or "sourcing" in only:
                print(f"Leader-aware sourcing on real Kafka: broker 6 leaves (10 x 8 MB, leads 4), "
                      f"{SOURCING_THROTTLE / 1e6:g} MB/s; moving phase from the cluster's side:", flush=True)
                print_sourcing(run_sourcing(bench))
        finally:
            if owned:
                cluster.down()
    print(f"reproduce: .venv/bin/python -m benchmarks.run real_kafka  (or make bench); "
          f"took {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
