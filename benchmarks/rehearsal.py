"""Rehearsal accuracy and cost (``make bench``).

For the demo plan and three benchmark plans: the rehearsal's predicted moving time against
a real run of the same plan on a *separately started* simulator (a ``kafka-sim serve``
subprocess seeded from the same snapshot file, driven by ``kafka-reassign execute`` in
another process): the two share nothing but the snapshot. The real run's moving time is
measured from the cluster's side: the served simulator's own clock and in-flight count,
read through its control port, from the first reassignment in flight to the last one done.
The real run's poll interval is the rehearsal's divided by the time scale, so both poll at
the same simulated moments (as a real cluster at time scale 1 would be polled).

Then how the per-broker move cap decides the moving time of a 60-broker plan (ratio to the
fixed-leader and source-free throttle bounds at 5, 10 and 20 moves per broker), and the cost: rehearsing a 20,000-partition
plan against its predicted real time, and the CPU seconds it needs.
"""
from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MB = 1_000_000


def _serve(snapshot_file: str, time_scale: float) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen([str(BIN / "kafka-sim"), "serve", "--snapshot", snapshot_file, "--time-scale",
                             str(time_scale), "--control-port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    control = ""
    while not control:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("kafka-sim serve exited before listening")
        if line.startswith("CONTROL="):
            control = line.strip().split("=", 1)[1]
    bootstrap = proc.stdout.readline().strip().split("=", 1)[1]
    return proc, bootstrap, control


class ControlWatch(threading.Thread):
    """Polls the served simulator's ``state`` (its simulated clock and in-flight reassignments)."""

    def __init__(self, control: str) -> None:
        super().__init__(daemon=True)
        from kafka_sim.cli import send_control
        self.send = send_control
        self.control = control
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            st = json.loads(self.send(self.control, "state"))
            self.samples.append((float(st["sim_time"]), int(st["reassignments"])))
            self.stop.wait(0.01)

    def moving_seconds(self) -> float | None:
        s = self.samples
        first = next((i for i, (_, n) in enumerate(s) if n > 0), None)
        last = max((i for i, (_, n) in enumerate(s) if n > 0), default=None)
        if first is None or last is None or last + 1 >= len(s):
            return None
        start = (s[first - 1][0] + s[first][0]) / 2 if first else s[first][0]
        end = (s[last][0] + s[last + 1][0]) / 2
        return end - start


def real_run(snapshot: dict[str, Any], plan: dict[str, Any], params: dict[str, Any], time_scale: float) -> float:
    """Moving time (simulated seconds) of ``kafka-reassign execute`` on a served simulator."""
    from kafka_reassign import defaults as D
    with tempfile.TemporaryDirectory() as tmp:
        snap_file, plan_file = os.path.join(tmp, "snapshot.json"), os.path.join(tmp, "plan.json")
        Path(snap_file).write_text(json.dumps(snapshot))
        Path(plan_file).write_text(json.dumps(plan))
        proc, bootstrap, control = _serve(snap_file, time_scale)
        watch = ControlWatch(control)
        try:
            watch.start()
            time.sleep(0.2)
            cmd = [str(BIN / "kafka-reassign"), "execute", "--bootstrap-server", bootstrap, "--plan", plan_file,
                   "--snapshot", snap_file, "--produce-sample-seconds", "0", "--record-dir", os.path.join(tmp, "rec"),
                   "--throttle", str(params["throttle_bytes_per_sec"]),
                   "--poll-interval-seconds", str(params["poll_interval_seconds"] / time_scale),
                   "--stall-window-seconds", "100000", "--move-timeout-minutes", "100000",
                   "--max-movements-per-broker", str(params.get("max_movements_per_broker", D.MAX_MOVEMENTS_PER_BROKER)),
                   "--print-interval", "100000"]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            if run.returncode:
                raise RuntimeError(f"real run failed: {run.stderr[-2000:]}")
            time.sleep(0.2)
        finally:
            watch.stop.set()
            watch.join(5)
            proc.terminate()
            proc.wait(10)
        moving = watch.moving_seconds()
        if moving is None:
            raise RuntimeError("the real run's moves were not seen finishing")
        return moving


def _generated(brokers: int, topics: int, partitions: int, seed: int, median: float, produce_scale: float,
               skew: float = 0.0) -> dict[str, Any]:
    from kafka_sim.generate import GenerateOptions, generate_snapshot
    snap = generate_snapshot(GenerateOptions(brokers=brokers, racks=3, topics=topics, partitions=partitions,
                                             replication_factor=3, seed=seed, median_partition_bytes=median,
                                             size_sigma=0.6, skew=skew))
    for t in snap["topics"]:
        for p in t["partitions"]:
            p["bytes_in_per_sec"] = round(p["bytes_in_per_sec"] * produce_scale, 1)
    return snap


def decommission_plan(snapshot: dict[str, Any], broker: int) -> dict[str, Any]:
    """Every replica of ``broker`` to the least loaded broker of the same rack not holding the partition."""
    rack = {b["id"]: b["rack"] for b in snapshot["brokers"]}
    load = {b: 0 for b in rack}
    entries = []
    for t in snapshot["topics"]:
        for p in t["partitions"]:
            if broker not in p["replicas"]:
                continue
            choices = [b for b in rack if rack[b] == rack[broker] and b != broker and b not in p["replicas"]]
            dst = min(choices, key=lambda b: (load[b], b))
            load[dst] += 1
            entries.append({"topic": t["name"], "partition": p["partition"],
                            "replicas": [dst if r == broker else r for r in p["replicas"]]})
    return {"version": 1, "partitions": entries}


def hottest_moves(snapshot: dict[str, Any], count: int, seed: int) -> dict[str, Any]:
    """The ``count`` most written partitions each move one follower to a same-rack broker."""
    rng = random.Random(seed)
    rack = {b["id"]: b["rack"] for b in snapshot["brokers"]}
    parts = sorted(((t["name"], p) for t in snapshot["topics"] for p in t["partitions"]),
                   key=lambda x: -x[1]["bytes_in_per_sec"])[:count]
    entries = []
    for name, p in parts:
        out = p["replicas"][-1]
        choices = [b for b in rack if rack[b] == rack[out] and b not in p["replicas"]]
        entries.append({"topic": name, "partition": p["partition"],
                        "replicas": p["replicas"][:-1] + [rng.choice(choices)]})
    return {"version": 1, "partitions": entries}


def cases() -> list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]]:
    from kafka_reassign_demo import demo_plan, load_scenario
    demo = load_scenario()
    dec = _generated(9, 4, 8, seed=3, median=400 * MB, produce_scale=400)
    skewed = _generated(9, 5, 8, seed=5, median=80 * MB, produce_scale=300, skew=0.6)
    hot = _generated(6, 3, 8, seed=8, median=100 * MB, produce_scale=1500)
    return [
        ("demo plan (the demo scenario)", demo, demo_plan(demo),
         {"throttle_bytes_per_sec": 10 * MB, "poll_interval_seconds": 5.0}),
        ("decommission broker 9", dec, decommission_plan(dec, 9),
         {"throttle_bytes_per_sec": 20 * MB, "poll_interval_seconds": 5.0}),
        ("rebalance a skewed cluster, 2 moves per broker", skewed, demo_plan(skewed, moves=16),
         {"throttle_bytes_per_sec": 15 * MB, "poll_interval_seconds": 5.0, "max_movements_per_broker": 2}),
        ("most written partitions (in-sync traffic counted)", hot, hottest_moves(hot, 8, 1),
         {"throttle_bytes_per_sec": 8 * MB, "poll_interval_seconds": 5.0}),
    ]


def accuracy(time_scale: float = 10.0) -> bool:
    from kafka_reassign.rehearsal.rehearse import rehearse
    ok = True
    print(f"{'plan':<52} {'moves':>5} {'rehearsal':>10} {'real run':>10} {'error':>7} {'formula':>9} "
          f"{'x bound':>8} {'x free':>7}")
    for name, snap, plan, params in cases():
        report = rehearse(copy.deepcopy(snap), plan, {**params, "produce_sample_seconds": 0})
        real = real_run(snap, plan, params, time_scale)
        pred = report.predicted_seconds or float("inf")
        err = (pred - real) / real
        ok &= abs(err) <= 0.10
        formula = report.formula.get("seconds")
        print(f"{name:<52} {len(plan['partitions']):>5} {pred:>9.1f}s {real:>9.1f}s {err:>+7.1%} "
              f"{formula if formula is None else round(formula, 1):>8}s {report.ratio or 0:>7.2f}x "
              f"{report.source_free_ratio or 0:>6.2f}x", flush=True)
    print(f"rehearsal within +-10% of the real run (simulated seconds, cluster side, real run at time scale "
          f"{time_scale:g}): {'yes' if ok else 'NO'}")
    return ok


def big_plan_cost(partitions: int = 20_000) -> bool:
    from kafka_reassign.rehearsal.rehearse import rehearse
    snap = _generated(60, 20, partitions // 20, seed=11, median=1e9, produce_scale=5)
    plan = hottest_moves(snap, partitions, 2)
    params = {"throttle_bytes_per_sec": 50 * MB, "poll_interval_seconds": 10.0, "produce_sample_seconds": 0}
    cpu0, wall0 = time.process_time(), time.monotonic()
    report = rehearse(snap, plan, params)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    pred = report.predicted_seconds or float("inf")
    ok = wall < pred / 20
    print(f"{partitions}-partition plan: predicted moving time {pred:.0f}s ({report.ratio or 0:.2f}x the fixed-leader "
          f"bound, {report.source_free_ratio or 0:.2f}x the source-free bound), rehearsal {wall:.1f}s wall, {cpu:.1f}s CPU = {wall / pred:.4f} of the predicted time "
          f"(target < 0.05): {'yes' if ok else 'NO'}", flush=True)
    return ok


def per_broker_sweep(partitions: int = 2000, caps: tuple[int, ...] = (5, 10, 20)) -> bool:
    """Moving time / throttle bound of one 60-broker plan as max_movements_per_broker grows.

    The throttle caps each broker's bandwidth whatever the cap is; the cap decides how much of
    it is used (a move runs at the smaller of its leader's and its new replica's share).
    """
    from kafka_reassign import defaults as D
    from kafka_reassign.rehearsal.rehearse import rehearse
    snap = _generated(60, 20, partitions // 20, seed=11, median=1e9, produce_scale=5)
    plan = hottest_moves(snap, partitions, 2)
    ratios = {}
    for cap in caps:
        report = rehearse(copy.deepcopy(snap), plan, {"throttle_bytes_per_sec": 50 * MB, "poll_interval_seconds": 10.0,
                                                      "produce_sample_seconds": 0, "max_movements_per_broker": cap})
        ratios[cap] = report.ratio or float("inf")
        print(f"{partitions} moves on 60 brokers, max_movements_per_broker={cap:>3}: moving time "
              f"{ratios[cap]:.2f}x the fixed-leader throttle bound, {report.source_free_ratio or 0:.2f}x the "
              f"source-free bound{' (the default)' if cap == D.MAX_MOVEMENTS_PER_BROKER else ''}", flush=True)
    return ratios.get(D.MAX_MOVEMENTS_PER_BROKER, 0.0) <= 1.15


def main() -> int:
    sys.path.insert(0, str(ROOT / "include"))
    ok = accuracy()
    ok &= per_broker_sweep()
    ok &= big_plan_cost()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
