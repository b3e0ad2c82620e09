"""Batching benchmark (`make bench`): ``kafka_reassign.steps.build_batches`` at scale.

For each size a skewed cluster is generated (``kafka_sim.generate``: 100 brokers, 3 racks,
RF 3) and about 60% of its partitions get a new placement the way a rebalance plans them
(mostly one replica replaced, sometimes two or three, some with a new preferred leader).
The moves are packed into KIP-435 batches with the planner's default limits (500 steps per
batch, 5 movements per broker, 1000 leader movements). Figures per size: moves, steps,
batches, mean steps per batch and the time of ``build_batches`` (including the KIP-435
step planning of every move).

``--naive`` also times the straightforward greedy this replaced (re-sort and scan every
pending step for every batch; the same batches, checked) on the sizes up to ``--naive-max``
(default 40k; it takes ~30 s at 40k).

Run: ``python -m benchmarks.batching [--sizes 10000,40000,150000] [--naive]``.
"""
from __future__ import annotations

import argparse
import random
import time
from typing import Any

SIZES = (10_000, 40_000, 150_000)
BROKERS = 100
LIMITS = (500, 5, 1000)  # PlanOptions defaults: partitions, per broker, leaders per batch


def make_case(n_partitions: int, brokers: int = BROKERS, seed: int = 1) -> tuple[Any, list]:
    """A generated cluster state and rebalance-like moves for about 60% of its partitions."""
    from kafka_reassign.plan import PartitionMove
    from kafka_reassign.state import ClusterState
    from kafka_sim.generate import GenerateOptions, generate_snapshot

    topics = max(1, n_partitions // 100)
    snap = generate_snapshot(GenerateOptions(brokers=brokers, racks=3, topics=topics,
                                             partitions=n_partitions // topics,
                                             replication_factor=3, skew=1.0, seed=seed))
    rng = random.Random(seed)
    ids = [b["id"] for b in snap["brokers"]]
    moves = []
    for t in snap["topics"]:
        for p in t["partitions"]:
            if rng.random() >= 0.6:
                continue
            reps = list(p["replicas"])
            for i in rng.sample(range(len(reps)), rng.choice([1, 1, 1, 1, 2, 3])):
                reps[i] = rng.choice([b for b in ids if b not in reps])
            moves.append(PartitionMove(t["name"], p["partition"], tuple(reps)))
    return ClusterState.from_snapshot(snap), moves


def naive_batches(moves, state, max_partition_movements, max_movements_per_broker,
                  max_leader_movements) -> list[list]:
    """The straightforward greedy: sort the pending steps and scan all of them, per batch."""
    from kafka_reassign.steps import steps_for_move

    chains = [c for c in (steps_for_move(m, state) for m in moves) if c]
    pending = {i: 0 for i in range(len(chains))}
    out = []
    while pending:
        order = sorted(pending, key=lambda i: (-(len(chains[i]) - pending[i]),
                                               -chains[i][pending[i]].bytes_to_copy, i))
        load: dict[int, int] = {}
        leaders, chosen = 0, []
        for i in order:
            if len(chosen) >= max_partition_movements:
                break
            s = chains[i][pending[i]]
            if any(load.get(b, 0) >= max_movements_per_broker for b in s.brokers_touched):
                continue
            if s.moves_leader and leaders >= max_leader_movements:
                continue
            chosen.append(i)
            for b in s.brokers_touched:
                load[b] = load.get(b, 0) + 1
            leaders += s.moves_leader
        out.append([chains[i][pending[i]] for i in chosen])
        for i in chosen:
            pending[i] += 1
            if pending[i] == len(chains[i]):
                del pending[i]
    return out


def run_one(n: int, naive: bool) -> dict[str, Any]:
    from kafka_reassign.steps import build_batches

    state, moves = make_case(n)
    t = time.perf_counter()
    batches = build_batches(moves, state, *LIMITS)
    seconds = time.perf_counter() - t
    steps = sum(len(b.steps) for b in batches)
    row: dict[str, Any] = {"partitions": n, "moves": len(moves), "steps": steps,
                           "batches": len(batches), "steps_per_batch": round(steps / len(batches), 1),
                           "build_batches_s": round(seconds, 2)}
    if naive:
        t = time.perf_counter()
        ref = naive_batches(moves, state, *LIMITS)
        row["naive_s"] = round(time.perf_counter() - t, 2)
        row["same_batches"] = ref == [b.steps for b in batches]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="partition counts")
    ap.add_argument("--naive", action="store_true", help="also time the straightforward greedy")
    ap.add_argument("--naive-max", type=int, default=40_000, help="largest size timed with --naive")
    args = ap.parse_args([] if argv is None else argv)
    print(f"build_batches, {BROKERS} brokers, RF 3, limits (partitions, per broker, leaders) = {LIMITS}")
    ok = True
    for n in (int(s) for s in args.sizes.split(",") if s):
        row = run_one(n, args.naive and n <= args.naive_max)
        ok = ok and row.get("same_batches", True)
        print("  " + "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
