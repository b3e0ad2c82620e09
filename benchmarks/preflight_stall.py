"""Pre-flight's smallest throttle against the throttle where a real move stops (issue 19; ``make bench``).

On the local Apache Kafka cluster, partition 0 of a topic on [1, 2, 3] is written at about
1 MB/s by an in-sync producer (confluent-kafka, acks=all), and the plan moves replica 3 to
broker 6 ([1, 2, 3] -> [1, 2, 6]). Pre-flight (``kafka-reassign validate`` with a low throttle,
as an operator runs it) measures the produce rate itself and names the smallest throttle that
lets the move finish.

The real stall point is then found on the same partition, producer still running. At each
probed throttle the KIP-73 configs are set (rate on brokers 1, 2, 3, 6; throttled replica lists
on the topic, as kafka-reassign-partitions does), left one quota window so the leader's quota
holds the in-sync traffic, the move is started, and the new replica's lag (leader log bytes -
its log bytes, from DescribeLogDirs) is sampled for ``SAMPLE_S`` after a settling time; the
slope of a least-squares line through the samples is the catch-up rate (negative: the replica
falls behind). The probe is then cancelled (KIP-455) and the replica on broker 6 removed before
the next. Bisection on the sign of the catch-up rate brackets the stall point to
``RESOLUTION``, and the stall point is where the line between the bracket's two probes crosses
zero: below it the new replica never catches up.

Prints the measured produce rate, pre-flight's smallest throttle, the real stall point, their
ratio (the issue asks 1.0 <= ratio <= 1.2: within 20%, never below) and every probe.

Run: ``.venv/bin/python -m benchmarks.preflight_stall`` (``KAFKA_LOCAL_DIR`` reuses a running
``kafka-local up --brokers 6 --racks 3 --log-dirs 2`` cluster).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kafka_reassign.cluster.admin import KafkaAdmin

from benchmarks.calibration import (MB, Producer, Scenario, WARMUP_S, _admin, _delete_topic, real_cluster,
                                    set_throttle, wait_until)

PRODUCE = 1.0 * MB
PREFILL = 60 * MB
SOURCE, TARGET = (1, 2, 3), (1, 2, 6)
SETTLE_S = 6.0  # a fresh follower quota lets about one sample through at once: not progress
SAMPLE_S = 20.0
RESOLUTION = 0.03  # of pre-flight's figure
CLI = str(Path(sys.executable).parent / "kafka-reassign")


@dataclass
class Probe:
    throttle: int
    catch_up: float  # bytes/s the lag fell by (negative: it grew)
    produce: float  # bytes/s the leader's log grew by meanwhile

    @property
    def progresses(self) -> bool:
        return self.catch_up > 0


def preflight_smallest(bootstrap: str, plan: Path) -> int:
    """The smallest throttle ``kafka-reassign validate`` accepts, from its refusal at a low throttle."""
    out = subprocess.run([CLI, "validate", "--bootstrap-server", bootstrap, "--plan", str(plan),
                          "--throttle", str(int(PRODUCE)), "--produce-sample-seconds", "5"],
                         capture_output=True, text=True, timeout=180)
    m = re.search(r"the smallest throttle that lets every move finish is [^(]+\((\d+)\)", out.stderr)
    if out.returncode != 2 or not m:
        raise RuntimeError(f"validate did not refuse as expected (rc {out.returncode}): {out.stdout}{out.stderr}")
    return int(m.group(1))


def _sizes(reader: KafkaAdmin, topic: str) -> dict[int, int]:
    """broker -> log bytes of partition 0 on brokers 1 and 6 (DescribeLogDirs)."""
    rows = reader.describe_log_dirs([1, 6], [(topic, 0)])
    return {r.broker: r.size for r in rows if not r.is_future}


def _lag_series(reader: KafkaAdmin, topic: str) -> tuple[list[float], list[float], list[float]]:
    """(times, lag bytes, leader bytes), one sample a second for SAMPLE_S."""
    ts, lags, leader = [], [], []
    t0 = time.monotonic()
    while time.monotonic() - t0 <= SAMPLE_S:
        s = _sizes(reader, topic)
        ts.append(time.monotonic() - t0)
        lags.append(float(s.get(1, 0) - s.get(6, 0)))
        leader.append(float(s.get(1, 0)))
        time.sleep(1.0)
    return ts, lags, leader


def _slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs) or 1e-9
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den


def probe(bootstrap: str, topic: str, throttle: int) -> Probe:
    """Throttle, start the move, sample the lag, cancel it and wait until broker 6 holds nothing."""
    from kafka.structs import TopicPartition
    sc = Scenario(f"probe {throttle}", {0: (SOURCE, TARGET)}, PREFILL, throttle)
    set_throttle(bootstrap, sc, topic, True)
    time.sleep(WARMUP_S)  # the leader's quota window fills with the in-sync traffic
    admin = _admin(bootstrap)
    key = TopicPartition(topic, 0)
    with KafkaAdmin(bootstrap_servers=bootstrap, client_id="preflight-stall") as reader:
        try:
            admin.alter_partition_reassignments({key: list(TARGET)})
            time.sleep(SETTLE_S)
            ts, lags, leader = _lag_series(reader, topic)
            admin.alter_partition_reassignments({key: None})
            wait_until(lambda: not admin.list_partition_reassignments([key]), 60.0, "the cancel to finish")
        finally:
            admin.close()
            set_throttle(bootstrap, sc, topic, False)
        wait_until(lambda: 6 not in _sizes(reader, topic), 60.0, "broker 6 to delete the cancelled replica")
    return Probe(throttle, -_slope(ts, lags), _slope(ts, leader))


def stall_point(bootstrap: str, topic: str, around: int, probes: list[Probe]) -> float:
    """The throttle where the catch-up rate crosses zero, bracketed to RESOLUTION x ``around``."""
    lo, hi = int(0.6 * around), int(1.4 * around)
    for t in (lo, hi):
        probes.append(probe(bootstrap, topic, t))
        print(f"  throttle {t / MB:.2f} MB/s: catch-up {probes[-1].catch_up / MB:+.3f} MB/s, "
              f"produce {probes[-1].produce / MB:.2f} MB/s", flush=True)
    if probes[0].progresses or not probes[1].progresses:
        raise RuntimeError(f"the stall point is not between {lo} and {hi} B/s: {probes}")
    while hi - lo > RESOLUTION * around:
        mid = (lo + hi) // 2
        probes.append(probe(bootstrap, topic, mid))
        p = probes[-1]
        print(f"  throttle {mid / MB:.2f} MB/s: catch-up {p.catch_up / MB:+.3f} MB/s, "
              f"produce {p.produce / MB:.2f} MB/s", flush=True)
        lo, hi = (lo, mid) if p.progresses else (mid, hi)
    below = next(p for p in reversed(probes) if p.throttle == lo)
    above = next(p for p in reversed(probes) if p.throttle == hi)
    return lo + (hi - lo) * -below.catch_up / (above.catch_up - below.catch_up)


def main(argv: list[str] | None = None) -> int:
    """Measure both figures and print them with their ratio; non-zero when outside [1.0, 1.2]."""
    from kafka_local.load import create_topic, fill
    with real_cluster() as bootstrap, tempfile.TemporaryDirectory(prefix="preflight-stall-") as tmp:
        topic = f"preflight-stall-{int(time.time())}"
        create_topic(bootstrap, topic, {0: list(SOURCE)}, {"min.insync.replicas": "2"})
        fill(bootstrap, topic, {0: PREFILL})
        plan = Path(tmp) / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": list(TARGET)}]}))
        producer = Producer(bootstrap, topic, 0, PRODUCE)
        producer.start()
        try:
            time.sleep(WARMUP_S)
            smallest = preflight_smallest(bootstrap, plan)
            print(f"pre-flight's smallest working throttle: {smallest / MB:.3f} MB/s", flush=True)
            probes: list[Probe] = []
            stall = stall_point(bootstrap, topic, smallest, probes)
        finally:
            producer.stop()
            _delete_topic(bootstrap, topic)
    if producer.errors:
        print(f"producer errors: {producer.errors[:3]}")
        return 1
    produce = sum(p.produce for p in probes) / len(probes)
    ratio = smallest / stall
    print(f"real Kafka 4.3.1, producer {produce / MB:.2f} MB/s measured, 2 in-sync followers: the new replica "
          f"stops gaining on the log end below {stall / MB:.3f} MB/s ({stall / produce:.2f} x the produce rate)")
    print(f"pre-flight smallest / real stall point = {ratio:.3f} (target 1.0 to 1.2: never below, within 20%)")
    return 0 if 1.0 <= ratio <= 1.2 else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
