"""Executor benchmark (`make bench`): the pipelined executor against the simulator, over the wire.

1. Moving phase / throttle bound. A plan moves RF-3 partitions from brokers 1-3 to 4-6 under a
   25 MB/s throttle. The moving phase is measured from the cluster's side: an observer thread
   with its own admin client lists the reassignments in flight every few milliseconds, from
   the first one submitted to the last one complete (in simulated seconds). The bound is the
   largest number of bytes any broker must send (as the prepare-time leader) or receive, divided
   by the throttle: no executor can finish sooner with those senders. The source-free bound
   beside it lets any replica of a step's current set send (planning/bounds.py). Idle time is
   the time within the moving phase with nothing in flight. Cases, both with every default
   setting (10 s polls, caps, order) at time scale 2 (simulator figures): 24 partitions of
   lognormal size (median 200 MB); 3,000 partitions of 1-10 MB.
2. Requests and wall time per poll at 1k, 10k and 20k partitions in the plan: a poll reads only
   what is in flight, so both stay flat as the plan grows.

Run: ``python -m benchmarks.executor [--quick]``.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

THROTTLE = 25_000_000
TARGETS = {"lognormal-24": 1.10, "small-3000": 1.30}


def rf3_snapshot(sizes: list[int], brokers: int = 6) -> dict[str, Any]:
    """Partitions of topic ``t`` on brokers 1-3 (leaders spread evenly) on a ``brokers``-broker cluster."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from sim_snapshots import make_snapshot

    snap = make_snapshot(brokers=brokers, topics={"t": {
        "partitions": len(sizes), "rf": 3, "replicas": [[1 + (p + i) % 3 for i in range(3)] for p in range(len(sizes))]}})
    for p, size in zip(snap["topics"][0]["partitions"], sizes):
        p["size_bytes"] = size
    return snap


def throttle_bounds(prepared: Any) -> tuple[float, float]:
    """(fixed-leader, source-free) bounds in seconds: the busiest broker's bytes in or out at the throttle,
    each copy sent by its prepare-time leader, or by any replica of the step's current set."""
    from kafka_reassign.planning.bounds import UniformLimits, partition_copy, source_free_bound, throttle_bound

    copies = [partition_copy(s.current, s.target, s.size_bytes, prepared.leaders.get(s.key, s.current[0]))
              for s in prepared.steps]
    limits = UniformLimits(THROTTLE)
    return throttle_bound(copies, limits).seconds, source_free_bound(copies, limits).seconds


class Observer(threading.Thread):
    """Lists reassignments over the wire every ``interval`` s; records (sim time, count in flight)."""

    def __init__(self, cluster: Any, interval: float = 0.003) -> None:
        super().__init__(daemon=True)
        from kafka_reassign.cluster.admin import KafkaAdmin

        self.cluster = cluster
        self.admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            n = len(self.admin.list_partition_reassignments(None))
            self.samples.append((self.cluster.sim_time(), n))
            time.sleep(self.interval)
        self.admin.close()

    def phase(self) -> tuple[float, float]:
        """(moving phase, idle time inside it) in simulated seconds."""
        busy = [k for k, (_, n) in enumerate(self.samples) if n > 0]
        if not busy:
            return 0.0, 0.0
        first, last = busy[0], busy[-1]
        # The phase ends when the listing is first seen empty after the last busy sample.
        end = self.samples[min(last + 1, len(self.samples) - 1)][0]
        idle = sum(self.samples[k + 1][0] - self.samples[k][0] for k in range(first, last)
                   if self.samples[k][1] == 0)
        return end - self.samples[first][0], idle


def moving_phase(name: str, sizes: list[int], time_scale: float, poll_sim_seconds: float,
                 per_broker: int | None = None) -> dict[str, Any]:
    """Run one plan through ``run_reassignment`` and measure it from the cluster's side."""
    from kafka_reassign.defaults import RUN_DEFAULTS
    from kafka_sim import SimulatedCluster

    cluster = SimulatedCluster(rf3_snapshot(sizes), time_scale=time_scale)
    cluster.start()
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [4 + (p + i) % 3 for i in range(3)]}
                                         for p in range(len(sizes))]}
    params = {**RUN_DEFAULTS, "throttle_bytes_per_sec": THROTTLE,
              "poll_interval_seconds": poll_sim_seconds / time_scale}
    if per_broker:
        params["max_movements_per_broker"] = per_broker
    result, phase, idle, wall = observed_run(cluster, plan, params)
    bound, free = throttle_bounds(result.prepared)
    return {"case": name, "partitions": len(sizes), "steps": len(result.prepared.steps),
            "outcome": result.progress.outcome if result.progress else None, "bound_s": round(bound, 1),
            "source_free_s": round(free, 1), "free_ratio": round(phase / free, 3),
            "moving_s": round(phase, 1), "ratio": round(phase / bound, 3), "target": TARGETS[name],
            "idle_s": round(idle, 2), "wall_s": round(wall, 1), "time_scale": time_scale,
            "poll_sim_s": poll_sim_seconds}


def observed_run(cluster: Any, plan: dict[str, Any], params: dict[str, Any],
                 after: Callable[[], Any] | None = None) -> tuple[Any, float, float, float]:
    """``run_reassignment`` on a started simulator, watched from its side; stops the simulator.

    :param after: called once the run ended, before the simulator stops (to read its state)
    :returns: (the run's result, moving phase and idle time in simulated s, wall s of the run)
    """
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.execution.store import MemoryExecutionStore
    from kafka_reassign.run.reassign import run_reassignment
    from kafka_reassign.throttle.record import MemoryRecordStore

    observer = Observer(cluster)
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)
    try:
        observer.start()
        t0 = time.monotonic()
        result = run_reassignment(admin, plan, params, MemoryRecordStore(), exec_store=MemoryExecutionStore(),
                                  on_event=lambda m: None)
        wall = time.monotonic() - t0
        time.sleep(0.05)
        if after is not None:
            after()
    finally:
        observer.stop_event.set()
        observer.join(5)
        admin.close()
        cluster.stop()
    phase, idle = observer.phase()
    return result, phase, idle, wall


class CountingAdmin:
    """A KafkaAdmin whose calls are counted as Kafka requests (DescribeLogDirs: one per broker)."""

    def __init__(self, admin: Any) -> None:
        self._admin = admin
        self.requests = 0
        self.kafka_seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._admin, name)
        if not callable(fn):
            return fn

        def counted(*args: Any, **kwargs: Any) -> Any:
            if name == "describe_log_dirs":
                brokers = args[0] if args else kwargs.get("broker_ids")
                self.requests += len(list(brokers)) if brokers is not None else 1
            elif name == "describe_configs":
                self.requests += 1
            else:
                self.requests += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.kafka_seconds += time.perf_counter() - t0

        return counted


def per_poll(n_partitions: int, window: int = 200) -> dict[str, Any]:
    """Median Kafka requests and wall ms per tick with a plan of ``n_partitions`` one-step moves."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.execution.store import MemoryExecutionStore
    from kafka_reassign.execution.executor import MoveExecutor
    from kafka_reassign.execution.limits import ExecutionLimits
    from kafka_reassign.run.prepare import prepare
    from kafka_sim import SimulatedCluster
    from kafka_sim.generate import GenerateOptions, generate_snapshot

    topics = max(1, n_partitions // 500)
    snap = generate_snapshot(GenerateOptions(brokers=30, racks=3, topics=topics, partitions=n_partitions // topics,
                                             replication_factor=3, seed=7))
    for t in snap["topics"]:
        for p in t["partitions"]:
            p["size_bytes"], p["bytes_in_per_sec"] = 500_000_000, 0
    rng = random.Random(7)
    ids = [b["id"] for b in snap["brokers"]]
    moves = []
    for t in snap["topics"]:
        for p in t["partitions"]:
            reps = list(p["replicas"])
            reps[-1] = rng.choice([b for b in ids if b not in reps])
            moves.append({"topic": t["name"], "partition": p["partition"], "replicas": reps})
    cluster = SimulatedCluster(snap, time_scale=1)  # slow moves: the window stays full while measured
    cluster.start()
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)
    try:
        prepared = prepare(admin, {"version": 1, "partitions": moves},
                           {"throttle_bytes_per_sec": 10_000_000, "max_partition_movements": window,
                            "max_movements_per_broker": 50})
        ex = MoveExecutor(prepared.steps, ExecutionLimits(max_partition_movements=window, max_movements_per_broker=50),
                          run_id="bench", leaders=prepared.leaders)
        counting, store = CountingAdmin(admin), MemoryExecutionStore()
        reqs, ms, own = [], [], []
        for _ in range(12):
            before, waited, t0 = counting.requests, counting.kafka_seconds, time.perf_counter()
            ex.tick(counting)
            store.save("bench", ex.state_json(), ex.progress().to_json())
            ms.append((time.perf_counter() - t0) * 1000)
            own.append(ms[-1] - (counting.kafka_seconds - waited) * 1000)
            reqs.append(counting.requests - before)
            time.sleep(0.02)
        state_kb = len(store.saved["bench"]) / 1000
    finally:
        admin.close()
        cluster.stop()
    steady = sorted(zip(ms[2:], reqs[2:], own[2:]))  # after the window filled
    mid = steady[len(steady) // 2]
    return {"partitions": n_partitions, "steps": len(prepared.steps), "window": window,
            "requests_per_poll": mid[1], "wall_ms_per_poll": round(mid[0], 1), "own_ms_per_poll": round(mid[2], 1),
            "state_kb": round(state_kb, 1)}


def lognormal_sizes(n: int, median: float, sigma: float, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [int(median * math.exp(rng.gauss(0.0, sigma))) for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the 24-partition case and 1k/10k per poll")
    args = ap.parse_args(argv if argv is not None else [])
    import logging

    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    print("Moving phase (cluster side, simulated seconds) / fixed-leader throttle bound (busiest broker's bytes / "
          "throttle, copies from the prepare-time leader); the source-free bound lets any current replica send:")
    # Default settings (10 s polls included) at time scale 2: the wake schedule's one-second gap
    # between cheap checks is wall time, so a faster simulated clock would stretch it.
    cases = [("lognormal-24", lognormal_sizes(24, 200e6, 0.8, 11), 2.0, 10.0, None)]
    if not args.quick:
        cases.append(("small-3000", [random.Random(5 + i).randint(1_000_000, 10_000_000) for i in range(3000)],
                      2.0, 10.0, None))
    worst = 0.0
    for name, sizes, scale, poll, per_broker in cases:
        r = moving_phase(name, sizes, scale, poll, per_broker)
        worst = max(worst, r["ratio"] / r["target"])
        print(f"  {name}: {r['steps']} steps, bound {r['bound_s']} s, moving {r['moving_s']} s -> ratio "
              f"{r['ratio']} (target <= {r['target']}), source-free bound {r['source_free_s']} s -> ratio "
              f"{r['free_ratio']}, idle {r['idle_s']} s (target <= 5), outcome {r['outcome']}, "
              f"wall {r['wall_s']} s at time scale {r['time_scale']:g}, poll {r['poll_sim_s']:g} sim-s", flush=True)
    print("Per poll (window 200 steps, 30 brokers): Kafka requests and wall ms as the plan grows (the executor's "
          "own ms excludes waiting on the simulator; DescribeLogDirs counts one request per broker, sent together):")
    for n in ((1_000, 10_000) if args.quick else (1_000, 10_000, 20_000)):
        r = per_poll(n)
        print(f"  {r['partitions']:>6} partitions ({r['steps']} steps): {r['requests_per_poll']} requests/poll, "
              f"{r['wall_ms_per_poll']} ms/poll wall, {r['own_ms_per_poll']} ms/poll in the executor, "
              f"saved state {r['state_kb']} kB", flush=True)
    print(f"worst ratio / target: {worst:.2f} ({'OK' if worst <= 1.0 else 'ABOVE TARGET'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
