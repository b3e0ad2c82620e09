"""Planner benchmark (`make bench`): skewed generated clusters, our plan vs Kafka's `--generate`.

For each cluster size a fresh Python process generates a skewed cluster
(``kafka_sim.generate``, RF 3, 3 racks, hot third of the brokers holding more and bigger
replicas) and plans a ``rebalance`` on Spark ``local[2]``. The plan time includes the Spark
session start-up (a cold JVM, since every size runs in its own process).

Figures per cluster:

* plan time, Spark start-up, move search, batching (KIP-435 steps via kafka_reassign.steps);
* data moved / lower bound (lower bound = bytes that must leave brokers above mean x 1.04);
* balance after = max broker utilisation / mean utilisation;
* the same for a Kafka ``--generate``-style assignment of the same cluster: Kafka's rack-aware
  round robin (random start, shifted followers), which ignores sizes and current placement.

Targets (issue 4): 100 brokers / 40k partitions under 60 s including Spark start-up, data moved
within 1.15x the lower bound, largest broker within 5% of the mean.

Run one size: ``python -m benchmarks.planner --brokers 100 --topics 400 --partitions 100``.
Pick sizes for `make bench` with ``PLANNER_BENCH_SIZES=12,100`` (default 12,100,300).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: brokers -> (topics, partitions per topic): 1.2k, 40k and 150k partitions
SIZES: dict[int, tuple[int, int]] = {12: (60, 20), 100: (400, 100), 300: (1000, 150)}
SKEW = 1.0
TARGET_SECONDS, TARGET_RATIO, TARGET_BALANCE = 60.0, 1.15, 1.05


def generate(brokers: int, topics: int, partitions: int, seed: int = 42) -> dict:
    """A skewed cluster (kafka_sim.generate when present, else a local generator)."""
    try:
        from kafka_sim.generate import GenerateOptions, generate_snapshot
    except ImportError:  # pragma: no cover - the simulator ships with the project
        return _fallback_generate(brokers, topics, partitions, seed)
    return generate_snapshot(GenerateOptions(brokers=brokers, racks=3, topics=topics,
                                             partitions=partitions, replication_factor=3,
                                             skew=SKEW, seed=seed))


def _fallback_generate(brokers: int, topics: int, partitions: int, seed: int) -> dict:
    rng = random.Random(seed)
    ids = list(range(1, brokers + 1))
    rack = {b: f"rack-{(b - 1) % 3}" for b in ids}
    weight = {b: 4.0 if b <= brokers // 3 else 1.0 for b in ids}
    out_topics = []
    for t in range(topics):
        parts = []
        for p in range(partitions):
            reps: list[int] = []
            while len(reps) < 3:
                cands = [b for b in ids if b not in reps and rack[b] not in {rack[r] for r in reps}]
                reps.append(rng.choices(cands, [weight[b] for b in cands])[0])
            size = int(1e9 * rng.lognormvariate(0, 1) * (2 if reps[0] <= brokers // 3 else 1))
            parts.append({"partition": p, "replicas": reps, "leader": reps[0], "size_bytes": size,
                          "bytes_in_per_sec": size / 604800, "log_dirs": ["/d"] * 3})
        out_topics.append({"name": f"t{t}", "configs": {"min.insync.replicas": "2"}, "partitions": parts})
    load: dict[int, float] = {b: 0.0 for b in ids}
    for t in out_topics:
        for p in t["partitions"]:
            for r in p["replicas"]:
                load[r] += p["size_bytes"]
    cap = float(max(load.values()) / 0.95)
    return {"version": 1, "brokers": [{"id": b, "rack": rack[b], "log_dirs": [{"path": "/d", "capacity_bytes": cap}]}
                                      for b in ids], "topics": out_topics}


def kafka_generate(snapshot: dict, seed: int = 7) -> list[list[int]]:
    """Replica lists as `kafka-reassign-partitions.sh --generate` would propose them.

    Kafka's rack-aware assignment: brokers ordered rack-alternating, a random start index and a
    random follower shift per topic, shift bumped every full round; it ignores partition sizes
    and where replicas are now.
    """
    rng = random.Random(seed)
    racks: dict[str, list[int]] = {}
    for b in sorted(snapshot["brokers"], key=lambda x: x["id"]):
        racks.setdefault(b["rack"], []).append(b["id"])
    order: list[int] = []
    i = 0
    while len(order) < len(snapshot["brokers"]):
        for r in sorted(racks):
            if i < len(racks[r]):
                order.append(racks[r][i])
        i += 1
    n = len(order)
    rack_of = {b["id"]: b["rack"] for b in snapshot["brokers"]}
    n_racks = len(racks)
    out = []
    for t in snapshot["topics"]:
        start, shift = rng.randrange(n), rng.randrange(n)
        for p in t["partitions"]:
            idx = p["partition"]
            if idx > 0 and (idx + start) % n == 0:
                shift += 1
            first = (idx + start) % n
            reps = [order[first]]
            j = 0
            while len(reps) < len(p["replicas"]):
                cand = order[(first + 1 + (shift + j) % (n - 1)) % n]
                j += 1
                if cand in reps:
                    continue
                if rack_of[cand] in {rack_of[r] for r in reps} and len({rack_of[r] for r in reps}) < n_racks \
                        and j < 3 * n:
                    continue
                reps.append(cand)
            out.append(reps)
    return out


def _evaluate(snapshot: dict, assignment: list[list[int]]) -> dict[str, float]:
    """Data moved and balance (max util / mean util) of a full assignment."""
    cap = {b["id"]: sum(d["capacity_bytes"] for d in b["log_dirs"]) for b in snapshot["brokers"]}
    load = {b: 0.0 for b in cap}
    moved = 0.0
    i = 0
    for t in snapshot["topics"]:
        for p in t["partitions"]:
            new = assignment[i]
            i += 1
            for r in new:
                load[r] += p["size_bytes"]
            moved += p["size_bytes"] * len(set(new) - set(p["replicas"]))
    mean = sum(load.values()) / sum(cap.values())
    return {"moved": moved, "balance": max(load[b] / cap[b] for b in cap) / mean}


def run_one(brokers: int, topics: int, partitions: int) -> dict[str, Any]:
    """Generate, plan on a cold Spark session, compare with --generate. Returns the figures."""
    t = time.monotonic()
    snap = generate(brokers, topics, partitions)
    gen_s = time.monotonic() - t
    from kafka_reassign.planner import plan

    t0 = time.monotonic()
    res = plan(snap, "rebalance", engine="spark", spark_master="local[2]")
    plan_s = time.monotonic() - t0
    s = res.summary
    kg = _evaluate(snap, kafka_generate(snap))
    lb = s["lower_bound_bytes"] or 0
    return {
        "brokers": brokers, "partitions": topics * partitions, "replicas": topics * partitions * 3,
        "generate_s": round(gen_s, 1), "plan_s": round(plan_s, 1),
        "spark_start_s": s["timings"].get("spark_start_s"),
        "spark_aggregate_s": s["timings"].get("spark_aggregate_s"),
        "search_s": s["timings"].get("search_s"), "batching_s": s["timings"].get("batching_s"),
        "balance_before": s["balance_before"], "balance_after": s["balance_after"],
        "moved_bytes": s["data_to_move_bytes"], "lower_bound_bytes": lb,
        "moved_over_lb": s["moved_over_lower_bound"],
        "replica_movements": s["replica_movements"], "leader_movements": s["leader_movements"],
        "replica_count_balance_after": s["replica_count_balance_after"],
        "leader_balance_after": s["leader_balance_after"], "batches": s["batches"],
        "kafka_generate_moved_bytes": round(kg["moved"]),
        "kafka_generate_moved_over_lb": round(kg["moved"] / lb, 3) if lb else None,
        "kafka_generate_balance_after": round(kg["balance"], 4),
    }


def _print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'brokers':>7} {'partitions':>10} {'plan s':>7} {'(spark':>7} {'search':>7} {'batch)':>7} "
          f"{'moved/LB':>8} {'bal before':>10} {'bal after':>9} {'count bal':>9} | "
          f"{'--generate moved/LB':>19} {'bal after':>9}")
    for r in rows:
        print(f"{r['brokers']:>7} {r['partitions']:>10} {r['plan_s']:>7.1f} {r['spark_start_s']:>7.1f} "
              f"{r['search_s']:>7.1f} {r['batching_s'] or 0:>7.1f} {r['moved_over_lb']:>8.3f} "
              f"{r['balance_before']:>10.3f} {r['balance_after']:>9.3f} "
              f"{r['replica_count_balance_after']:>9.3f} | "
              f"{r['kafka_generate_moved_over_lb'] or 0:>19.2f} {r['kafka_generate_balance_after']:>9.3f}")
    for r in rows:
        if r["brokers"] == 100:
            ok_t, ok_r, ok_b = (r["plan_s"] <= TARGET_SECONDS, r["moved_over_lb"] <= TARGET_RATIO,
                                r["balance_after"] <= TARGET_BALANCE)
            print(f"targets at 100 brokers / {r['partitions']} partitions: time {r['plan_s']:.1f}s "
                  f"{'OK' if ok_t else 'MISSED'} (<= {TARGET_SECONDS:.0f}s), moved/LB "
                  f"{r['moved_over_lb']:.3f} {'OK' if ok_r else 'MISSED'} (<= {TARGET_RATIO}), "
                  f"balance {r['balance_after']:.3f} {'OK' if ok_b else 'MISSED'} (<= {TARGET_BALANCE})")


def main(argv: list[str] | None = None) -> int:
    """Run every size in its own process (cold Spark each time) and print the table."""
    sizes = [int(x) for x in os.environ.get("PLANNER_BENCH_SIZES", "12,100,300").split(",") if x.strip()]
    root = str(Path(__file__).resolve().parents[1])
    rows = []
    rc = 0
    for b in sizes:
        topics, parts = SIZES.get(b, (max(1, b * 4), 100))
        print(f"planning {b} brokers, {topics * parts} partitions ...", flush=True)
        proc = subprocess.run([sys.executable, "-m", "benchmarks.planner", "--brokers", str(b),
                               "--topics", str(topics), "--partitions", str(parts)],
                              capture_output=True, text=True, cwd=root, timeout=1800)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            print(f"  failed (rc={proc.returncode}): {proc.stderr[-1500:]}")
            rc = 1
            continue
        row = json.loads(lines[-1])
        print("  " + json.dumps(row), flush=True)
        rows.append(row)
    if rows:
        _print_table(rows)
    return rc


def _cli() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int)
    ap.add_argument("--topics", type=int)
    ap.add_argument("--partitions", type=int)
    args = ap.parse_args()
    if args.brokers is None:
        return main()
    topics = args.topics or SIZES.get(args.brokers, (args.brokers * 4, 100))[0]
    parts = args.partitions or SIZES.get(args.brokers, (0, 100))[1]
    print(json.dumps(run_one(args.brokers, topics, parts)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_cli())
