"""Planner benchmark (`make bench`): five cluster shapes at 120k and 1.5M replicas, our plan
against Kafka's ``--generate`` round robin.

Shapes (:mod:`benchmarks.planner_shapes`, 4 racks, RF 3, lognormal topic sizes, skew inside each
rack): ``skew``, ``new-brokers`` (+30% empty brokers), ``remove`` (drain 10%), ``hetero``
(1x/2x/4x capacities), ``hot`` (5 hot topics). Sizes: 120k replicas = 100 brokers x 400 topics
x 100 partitions; 1.5M replicas = 300 brokers x 5,000 topics x 100 partitions
(``PLANNER_BENCH_SIZES=300k``: 300 brokers x 1,000 topics, not run by default).

Each plan runs in a fresh process on Spark ``local[2]`` with default settings (a cold JVM:
the wall time includes Python and Spark start). The parent generates the snapshot-lines file
(not timed) and checks the plan file itself:

* moved / bound: data moved over the summary's ``lower_bound_bytes``, the least any plan must
  move to reach the balance the listed data goals accept together (disk: every broker at most
  ``balance_tolerance`` above the mean utilisation, drained brokers empty; network-in and
  topic-spread when listed and reached: :mod:`kafka_reassign.planning.spark.lower_bound`): the figure
  the UI and the metric show. A plan never moves less (a row below 1.0 fails); each goal's own
  bound is in the row's ``bound_by_goal``;
* disk balance after = fullest broker's utilisation / mean utilisation; leaders after = most
  preferred leaders on a broker / mean; rack-safe = moved partitions keeping 3 distinct racks;
* the same figures for Kafka's ``--generate`` (rack-alternating round robin from a random start).

Targets (issue 10): 1 <= moved/bound <= 1.05 (1.10 with topic-spread listed, as by default:
issue 23's target under every goal), disk <= 1.05, leaders <= 1.10, 100% rack-safe, wall
<= 30 s at 120k, <= 180 s at 1.5M and (issue 23) <= 120 s at 3M with every goal listed;
``hot-traffic`` (issue 23, the network-in goal): network in max/mean <= 1.10 and moved/bound <=
1.10, the rest as above. ``PLANNER_BENCH_SIZES=120k`` skips the 1.5M runs (minutes on 2 cores);
``PLANNER_BENCH_GOALS=...`` plans with that ``balance_goals`` list; ``PLANNER_BENCH_SHAPES=skew,hot``
picks shapes; ``PLANNER_BENCH_STRESS=1`` adds a 3M replica skew run with every goal listed
(issue 23: <= 120 s wall, Spark start included) and an over-the-limit run that must fail with a
clear error. Topic spread (issue 23, goal topic-spread) is reported for every plan; it is a
target (0) when the goals list topic-spread (the default list does).

The hard capacity goals (issue 23): ``hot-traffic`` at the first size is planned once more with
every broker's link at ``PLANNER_BENCH_LINK`` (default 1.05) x the mean network in /
``network_capacity_ceiling`` (goal network-capacity) and ``max_replicas_per_broker`` at 1.02 x the
mean replicas (goal replica-capacity); target: the fullest link at most the ceiling each way and
no broker above the cap that was not above it before. ``PLANNER_BENCH_LINK=0`` skips it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.planner_shapes import RF, SHAPES, TRAFFIC_SHAPES, Shape, evaluate, generate, round_robin
from kafka_reassign.planning.goal_order import BALANCE_GOALS, DEFAULT_BALANCE_GOALS
from kafka_reassign.planning.spark.spread import topic_spread

#: every balance goal listed (issue 23's 3M target: "all goals on")
ALL_GOALS = ",".join(g.name for g in BALANCE_GOALS)

#: name -> (brokers, topics, partitions per topic)
#: 300k: the 1.5M cluster's 300 brokers with a fifth of its topics (a shape between the two, quick
#: enough to iterate on the 300-broker layouts)
SIZES = {"120k": (100, 400, 100), "300k": (300, 1000, 100), "1.5m": (300, 5000, 100), "3m": (300, 10000, 100)}
TARGET_SECONDS = {"120k": 30.0, "300k": 60.0, "1.5m": 180.0, "3m": 120.0}  # 3m: issue 23, every goal listed
TARGET_RATIO, TARGET_DISK, TARGET_LEADERS = 1.05, 1.05, 1.10
#: issue 23, shapes with hot topics (TRAFFIC_SHAPES): network in max/mean, and moved / bound (the
#: joint bound of the listed data goals the plan reaches)
TARGET_NETWORK_IN, TARGET_TRAFFIC_RATIO = 1.10, 1.10
ROOT = Path(__file__).resolve().parents[1]


def run_plan(path: Path, goal: str, options: dict[str, Any], out: Path,
             master: str = "local[2]") -> tuple[float, dict | None, str]:
    """One `kafka-reassign plan` in its own process; (wall seconds, summary or None, stderr)."""
    cmd = [sys.executable, "-m", "kafka_reassign.planning.spark.command", "--snapshot", str(path), "--goal", goal,
           "--out", str(out), "--no-chart", "--spark-master", master]
    if options.get("brokers"):
        cmd += ["--brokers", ",".join(str(b) for b in options["brokers"])]
    if options.get("extra"):
        cmd += ["--options", json.dumps(options["extra"])]
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    wall = time.monotonic() - t
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return wall, (json.loads(lines[-1]) if proc.returncode == 0 and lines else None), proc.stderr


def applied(s: Shape, plan_file: Path) -> tuple[np.ndarray, float]:
    """The replicas after the plan, and the share of moved partitions on 3 distinct racks."""
    index = {(f"topic-{t}", p): i for i, (t, p) in enumerate(zip(s.topic_of.tolist(), s.part_of.tolist()))}
    after = s.replicas.copy()
    safe = total = 0
    for e in json.loads(plan_file.read_text())["partitions"]:
        i = index[(e["topic"], e["partition"])]
        after[i] = e["replicas"]
        total += 1
        safe += len({int(s.rack[b]) for b in e["replicas"]}) == RF
    return after, (safe / total if total else 1.0)


def spread_of(s: Shape, replicas: np.ndarray, slack: int = 1) -> int:
    """The topic spread of a placement, from the plan file applied (the summary's measure, checked
    apart): placeable brokers are all but the drained ones."""
    topics = np.repeat(s.topic_of, replicas.shape[1])
    pairs, counts = np.unique(np.stack([topics, replicas.ravel()]), axis=1, return_counts=True)
    drained = set(s.options.get("brokers", ())) if s.goal == "remove-brokers" else set()
    return topic_spread({(str(t), int(b)): int(n) for (t, b), n in zip(pairs.T.tolist(), counts.tolist())},
                        {int(b): float(c) for b, c in zip(s.brokers, s.capacity) if int(b) not in drained}, slack)


def one(shape: str, size: str, work: Path, goals: str | None = None) -> dict[str, Any]:
    """One shape planned and checked.

    :param goals: a balance_goals list (default: $PLANNER_BENCH_GOALS, else the planner's default)
    """
    brokers, topics, parts = SIZES[size]
    s = generate(shape, topics, parts, brokers, work / f"{shape}-{size}.jsonl")
    out = work / f"{shape}-{size}.plan.json"
    goals = goals or os.environ.get("PLANNER_BENCH_GOALS")  # e.g. to add leader-bytes-in
    options = {**s.options, "extra": {**s.options.get("extra", {}), "balance_goals": goals}} if goals else s.options
    wall, summary, err = run_plan(s.path, s.goal, options, out)
    row: dict[str, Any] = {"shape": shape, "size": size, "replicas": int(s.replicas.size), "wall_s": round(wall, 1)}
    if summary is None:
        return {**row, "error": err.strip().splitlines()[-1] if err.strip() else "no summary"}
    after, safe = applied(s, out)
    mine = evaluate(s, after)
    rr = evaluate(s, round_robin(s))
    bound = summary["lower_bound_bytes"] or 1
    return {**row, "moved_over_bound": round(mine["moved"] / bound, 4),
            "bound_goals": summary["lower_bound_goals"], "bound_by_goal": summary["lower_bound_by_goal"],
            "disk_after": round(mine["balance"], 4), "leaders_after": round(mine["leader_balance"], 4),
            "disk_before": summary["balance_before"], "rack_safe": round(safe, 4),
            "network_in": summary["balance"]["network_in"], "leader_bytes_in": summary["balance"]["leader_bytes_in"],
            "network_out": summary["balance"]["network_out"],
            "replica_moves": summary["replica_movements"], "timings": summary["timings"],
            "topic_spread": [spread_of(s, s.replicas), spread_of(s, after)],
            "search_pieces": summary.get("search_pieces"), "plan_s": summary.get("plan_seconds"),
            "rr_moved_over_bound": round(rr["moved"] / bound, 2), "rr_disk_after": round(rr["balance"], 4),
            "rr_leaders_after": round(rr["leader_balance"], 4)}


def verdict(r: dict[str, Any], goals: str | None = None) -> str:
    """OK, MISSED or FAILED against the targets.

    :param goals: the balance_goals list the row was planned with (default: $PLANNER_BENCH_GOALS)
    """
    goals = goals or os.environ.get("PLANNER_BENCH_GOALS") or ",".join(DEFAULT_BALANCE_GOALS)
    if "error" in r:
        return "FAILED"
    traffic = r["shape"] in TRAFFIC_SHAPES
    # issue 23: under every goal together (topic spread copies too) the joint bound's target is 1.10
    joint = traffic or "topic-spread" in goals
    ok = (1.0 <= r["moved_over_bound"] <= (TARGET_TRAFFIC_RATIO if joint else TARGET_RATIO)
          and r["disk_after"] <= TARGET_DISK and r["leaders_after"] <= TARGET_LEADERS and r["rack_safe"] == 1.0
          and r["wall_s"] <= TARGET_SECONDS[r["size"]]
          and (not traffic or r["network_in"]["after"] <= TARGET_NETWORK_IN)
          and (r["topic_spread"][1] == 0 or "topic-spread" not in goals))
    return "OK" if ok else "MISSED"


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'shape':<12}{'replicas':>10}{'wall s':>8}{'moved/bound':>12}{'disk':>7}{'leaders':>8}"
          f"{'rack-safe':>10}{'net in before->after':>22}{'net out':>15}{'spread':>9} | {'round robin: moved/bound':>24}{'disk':>7}"
          f"{'leaders':>8}  targets")
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:<12}{r['replicas']:>10}{r['wall_s']:>8.1f}  error: {r['error']}")
            continue
        print(f"{r['shape']:<12}{r['replicas']:>10}{r['wall_s']:>8.1f}{r['moved_over_bound']:>12.3f}"
              f"{r['disk_after']:>7.3f}{r['leaders_after']:>8.3f}{r['rack_safe']:>10.1%}"
              f"{r['network_in']['before']:>13.2f} -> {r['network_in']['after']:<5.2f}"
              f"{r['network_out']['before']:>6.2f} -> {r['network_out']['after']:<5.2f}"
              f"{r['topic_spread'][0]:>4} -> {r['topic_spread'][1]:<2} | "
              f"{r['rr_moved_over_bound']:>24.2f}{r['rr_disk_after']:>7.3f}{r['rr_leaders_after']:>8.3f}  "
              f"{verdict(r)}")
    print("targets: 1 <= moved/bound <= 1.05 (bound: the accepted balance), disk <= 1.05, leaders <= 1.10, "
          "100% rack-safe, wall <= 30 s (120k) / 180 s (1.5M) / 120 s (3M, every goal), Spark start included; the machine "
          "is shared, so wall times are noisy. Net in = produce received as leader or follower, max/mean, "
          "from the plan summary; net out = sent as leader (produce x (followers + consumer_fanout)), max/mean, "
          "from the plan summary; hot-traffic (issue 23): net in <= 1.10 and moved/bound <= 1.10; spread = "
          "topic spread before -> after (largest excess of one topic on a broker over ceil(replicas / "
          "brokers) + 1, from the plan file; 0 with topic-spread in PLANNER_BENCH_GOALS)")


def capacity_row(size: str, work: Path, factor: float) -> None:
    """The hot-traffic shape with every link and the replica cap binding: the goals' figures."""
    brokers, topics, parts = SIZES[size]
    s = generate("hot-traffic", topics, parts, brokers, work / f"hot-traffic-{size}.jsonl")
    mean_in = float(s.produce_rates().sum()) * RF / brokers  # every replica receives its produce
    ceiling, cap = 0.8, int(len(s.replicas.flat) / brokers * 1.02)
    held = np.bincount(s.replicas.ravel(), minlength=max(s.brokers) + 1)
    extra = {"broker_network_capacity_bytes_per_sec": mean_in * factor / ceiling, "max_replicas_per_broker": cap}
    wall, summary, err = run_plan(s.path, s.goal, {**s.options, "extra": {**s.options.get("extra", {}), **extra}},
                                  work / "capacity.plan.json")
    if summary is None:
        print(f"capacity goals ({size}): error {err.strip().splitlines()[-1:]}")
        return
    after, _ = applied(s, work / "capacity.plan.json")
    now = np.bincount(after.ravel(), minlength=held.size)
    pushed = int(((now > cap) & (now > held)).sum())
    net = summary["network_capacity"]
    ok = net["in"]["after"] <= ceiling and net["out"]["after"] <= ceiling and pushed == 0
    print(f"capacity goals, hot-traffic {size}: links at {factor:g} x mean network in / {ceiling:g}, "
          f"max {cap} replicas a broker; fullest link in {net['in']['before']:.2f} -> {net['in']['after']:.3f}, "
          f"out {net['out']['before']:.2f} -> {net['out']['after']:.3f} (ceiling {ceiling:g}); replicas "
          f"{int(held.max())} -> {int(now.max())} (cap {cap}, {pushed} pushed above); disk "
          f"{summary['balance']['disk']['after']:.3f}, network in {summary['balance']['network_in']['after']:.3f}, "
          f"moved / bound {summary['moved_over_lower_bound']}; wall {wall:.1f} s: {'OK' if ok else 'MISSED'}")


def stress(work: Path) -> None:
    """3M replicas with every goal listed must finish within TARGET_SECONDS (issue 23); a task
    over max_task_replicas must fail fast and say why."""
    r = one("skew", "3m", work, ALL_GOALS)
    print(json.dumps(r), flush=True)
    print(f"3M replicas, goals {ALL_GOALS}: wall {r['wall_s']} s (target {TARGET_SECONDS['3m']:g} s), "
          f"{verdict(r, ALL_GOALS) if 'error' not in r else r['error']}")
    s = generate("skew", *SIZES["1.5m"][1:], SIZES["1.5m"][0], work / "limit.jsonl")
    wall, summary, err = run_plan(s.path, s.goal, {"extra": {"max_task_replicas": 100_000}}, work / "limit.plan.json")
    last = err.strip().splitlines()[-1] if err.strip() else ""
    print(f"over the limit: {'error' if summary is None else 'NO ERROR'} after {wall:.1f} s: {last[:240]}")


def main() -> int:
    sizes = [x.strip().lower() for x in os.environ.get("PLANNER_BENCH_SIZES", "120k,1.5m").split(",") if x.strip()]
    shapes = [x.strip() for x in os.environ.get("PLANNER_BENCH_SHAPES", ",".join(SHAPES + TRAFFIC_SHAPES)).split(",") if x.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="planner-bench-") as tmp:
        for size in sizes:
            for shape in shapes:
                r = one(shape, size, Path(tmp))
                print(json.dumps(r), flush=True)
                rows.append(r)
        print_table(rows)
        link = float(os.environ.get("PLANNER_BENCH_LINK", "1.05"))
        if link > 0 and sizes:
            capacity_row(sizes[0], Path(tmp), link)
        if os.environ.get("PLANNER_BENCH_STRESS"):
            stress(Path(tmp))
    return 0 if all(verdict(r) != "FAILED" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
