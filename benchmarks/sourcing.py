"""Leader-aware sourcing benchmark (`make bench`): a decommission where the leaving broker leads a third.

Broker 8 of 8 leaves. It holds one replica of 21 partitions (one per pair of brokers 1-7) and
leads every third of them; each of its replicas goes to the least loaded broker not already in
the partition, so brokers 1-7 each receive 3 copies while broker 8, as the fixed leader, would
send 7. The same plan runs twice through ``run_reassignment`` on the simulator (time scale 2,
10 MB/s throttle, 100 MB partitions, default settings otherwise): with ``leader_sourcing`` off
and on. The moving phase is measured from the cluster's side (an observer listing the
reassignments in flight), in simulated seconds; these are simulator figures.

Printed: each run's moving time against the fixed-leader bound (every copy from the leader at
prepare time) and the source-free bound (any in-sync replica may send: planning/bounds.py), the
leader changes it made, and whether every partition ends led by the plan's preferred leader.

Run: ``python -m benchmarks.sourcing``.
"""
from __future__ import annotations

import itertools
import logging
import sys
import time
from pathlib import Path
from typing import Any

MB = 1_000_000
THROTTLE = 10 * MB
SIZE = 100 * MB
TIME_SCALE = 2.0


def decommission_layout(brokers: int = 8) -> tuple[list[list[int]], list[list[int]]]:
    """(current, target) replicas: broker ``brokers`` leaves, holding one replica of a partition per pair
    of the others (21 partitions at 8 brokers) and leading every third; each replica goes to the
    least loaded broker not already in the partition."""
    last = brokers
    current, target, received = [], [], {b: 0 for b in range(1, last)}
    for p, (a, b) in enumerate(itertools.combinations(range(1, last), 2)):
        now = [(last, a, b), (a, last, b), (a, b, last)][p % 3]
        new = min((x for x in received if x not in (a, b)), key=lambda x: (received[x], x))
        received[new] += 1
        current.append(list(now))
        target.append([new if r == last else r for r in now])
    return current, target


def run(sourcing: bool) -> dict[str, Any]:
    """One run of the decommission on a fresh simulator; figures from the cluster's side."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from sim_snapshots import make_snapshot

    from benchmarks.executor import observed_run
    from kafka_reassign.defaults import RUN_DEFAULTS
    from kafka_sim import SimulatedCluster

    current, target = decommission_layout()
    cluster = SimulatedCluster(make_snapshot(brokers=8, topics={"t": {
        "partitions": len(current), "rf": 3, "size_bytes": SIZE, "replicas": current}}), time_scale=TIME_SCALE)
    cluster.start()
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": r} for p, r in enumerate(target)]}
    params = {**RUN_DEFAULTS, "throttle_bytes_per_sec": THROTTLE, "poll_interval_seconds": 10 / TIME_SCALE,
              "leader_sourcing": sourcing, "produce_sample_seconds": 0}
    leaders: list[int] = []
    result, phase, idle, _ = observed_run(cluster, plan, params, after=lambda: leaders.extend(
        cluster.partition_state("t", p)["leader"] for p in range(len(target))))
    assert result.progress is not None
    return {"sourcing": sourcing, "steps": len(result.prepared.steps), "outcome": result.progress.outcome,
            "moving_s": phase, "idle_s": idle, "leader_changes": result.progress.leader_changes,
            "not_preferred": [p for p, lead in enumerate(leaders) if lead != target[p][0]],
            "estimate": result.prepared.estimate}


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    off, on = run(False), run(True)
    fixed, free = off["estimate"]["bound_seconds"], off["estimate"]["source_free_seconds"]
    print(f"Decommission of broker 8 (21 x {SIZE // MB} MB, leads 7), {THROTTLE // MB} MB/s, simulator at time "
          f"scale {TIME_SCALE:g} (simulated seconds): fixed-leader bound {fixed:.1f} s, source-free bound "
          f"{free:.1f} s ({1 - free / fixed:.0%} below)")
    for r in (off, on):
        print(f"  leader_sourcing {'on ' if r['sourcing'] else 'off'}: {r['steps']} steps, moving {r['moving_s']:.1f} s"
              f" = {r['moving_s'] / fixed:.2f}x fixed-leader, {r['moving_s'] / free:.2f}x source-free; idle "
              f"{r['idle_s']:.1f} s; {r['leader_changes']} leader changes; outcome {r['outcome']}; partitions not "
              f"led by the plan's preferred leader at the end: {len(r['not_preferred'])}")
    ok = on["moving_s"] / free <= 1.10 and free <= 0.8 * fixed and not on["not_preferred"]
    print(f"target: sourcing on <= 1.10x the source-free bound, which is >= 20% below the fixed-leader one: "
          f"{'OK' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
