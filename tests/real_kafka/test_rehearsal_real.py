"""Issue 19 in CI: the rehearsal predicts a real Apache Kafka 4.3.1 run's moving time within 10%.

The smallest case of benchmarks/rehearsal_real.py: six 10 MB partitions spread over the six
brokers, `kafka-reassign snapshot --sample-seconds` (which measures the topic's 0.9 MB record
batches), `kafka-reassign plan --goal remove-brokers --brokers 6 --engine local`, `kafka-reassign
rehearse --snapshot`, then `kafka-reassign execute` with the same flags, its moving time read
from the cluster. The execute restores its throttle (the autouse check of conftest.py reads
every broker's throttle configs back); the case deletes its topic, so its name is not one of
``topic_name``'s, whose topic configs that check would read.
"""
from __future__ import annotations

import os
import time

from benchmarks import rehearsal_real as rr
from benchmarks.real_kafka_cluster import Bench

MB = 1_000_000


def test_rehearsal_predicts_a_real_decommission_within_ten_percent(local_kafka, tmp_path):
    case = rr.decommission_case(f"rehearsal-decom-{os.getpid()}-{time.monotonic_ns()}", 10 * MB)
    result = rr.run_case(Bench(local_kafka, local_kafka.bootstrap_servers, tmp_path), case)
    print(f"{case.name}: predicted {result.predicted} s, actual {result.actual} s; " + "; ".join(result.notes))
    assert result.moves == 3, result.notes  # the three replicas broker 6 held
    assert result.predicted is not None and result.actual is not None, result.notes
    assert abs(result.predicted / result.actual - 1) <= rr.TOLERANCE, (
        f"rehearsal {result.predicted:.1f} s vs real Kafka {result.actual:.1f} s "
        f"({result.predicted / result.actual:.2f})")
