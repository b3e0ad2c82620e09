"""Benchmark: what the simulator's physics costs at 100 brokers x 100k partitions.

Produce traffic on 10% of the partitions, 500 throttled moves in flight (KIP-73 quotas with
in-sync traffic recorded, followers on a few degraded links falling behind), and the
server's cached all-topics Metadata response. Prints

- CPU seconds per simulated minute of physics (``advance`` in 10 ms ticks and in 1 s ticks,
  the way a high time scale drives it), as a ratio to a bound of 1 CPU second;
- the cached Metadata latency (warm, in process, encode included) against 5 ms.

Run: ``.venv/bin/python -m benchmarks.sim_physics [--brokers N --partitions P --moves M]``.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import time

CPU_BOUND_S_PER_SIM_MIN = 1.0
METADATA_BOUND_MS = 5.0


def build_snapshot(brokers: int, partitions: int, traffic_share: float, seed: int = 1) -> dict:
    """Brokers over 5 racks, 100 topics, RF 3, writes on ``traffic_share`` of the partitions."""
    rng = random.Random(seed)
    bs = [{"id": i, "rack": f"r{i % 5}", "log_dirs": [{"path": "/d1", "capacity_bytes": 8e12},
                                                       {"path": "/d2", "capacity_bytes": 8e12}]}
          for i in range(1, brokers + 1)]
    per_topic = max(1, partitions // 100)
    topics = []
    for t in range(100):
        parts = []
        for p in range(per_topic):
            r = rng.sample(range(1, brokers + 1), 3)
            rate = rng.uniform(20e3, 200e3) if rng.random() < traffic_share else 0.0
            parts.append({"partition": p, "replicas": r, "leader": r[0], "size_bytes": rng.lognormvariate(20, 1.2),
                          "bytes_in_per_sec": rate})
        topics.append({"name": f"topic{t:03d}", "configs": {}, "partitions": parts})
    return {"version": 1, "brokers": bs, "topics": topics}


class MoveFeeder:
    """Keeps ``moves`` one-replica reassignments in flight, throttled as kafka-reassign-partitions does."""

    def __init__(self, model, moves: int, seed: int = 2) -> None:
        self.model = model
        self.moves = moves
        self.rng = random.Random(seed)
        self.topics = list(model.topics.values())
        self.started = 0
        model.incremental_alter_configs(4, "", [("leader.replication.throttled.rate", 0, "20000000"),
                                                ("follower.replication.throttled.rate", 0, "20000000")])

    def top_up(self) -> None:
        """Start moves until ``moves`` are in flight (one AlterPartitionReassignments call)."""
        m = self.model
        busy = {(t, i) for t, i, *_r in m.list_reassignments()}
        items, leader_thr, follower_thr = [], {}, {}
        while len(busy) + len(items) < self.moves:
            p = self.rng.choice(self.rng.choice(self.topics).partitions)
            if (p.topic, p.index) in busy:
                continue
            busy.add((p.topic, p.index))
            new = self.rng.choice([b for b in m.brokers if b not in p.replicas])
            items.append((p.topic, p.index, [new] + p.replicas[1:]))
            leader_thr.setdefault(p.topic, []).extend(f"{p.index}:{b}" for b in p.replicas)
            follower_thr.setdefault(p.topic, []).append(f"{p.index}:{new}")
        for name in leader_thr:  # APPEND, as the tool adds each batch's replicas
            m.incremental_alter_configs(2, name, [
                ("leader.replication.throttled.replicas", 2, ",".join(leader_thr[name])),
                ("follower.replication.throttled.replicas", 2, ",".join(follower_thr[name]))])
        res = m.alter_reassignments(items)
        assert all(code == 0 for *_x, code, _m in res), res[:3]
        self.started += len(items)


def cpu_per_sim_minute(feeder: MoveFeeder, tick: float, sim_seconds: float) -> float:
    """CPU seconds per simulated minute of ticks, topping moves up every simulated second."""
    model = feeder.model
    t0 = time.process_time()
    steps = int(sim_seconds / tick)
    per_second = max(1, int(round(1.0 / tick)))
    for i in range(steps):
        model.advance_by(tick)
        if i % per_second == 0:
            feeder.top_up()
    return (time.process_time() - t0) / (steps * tick) * 60.0


def metadata_ms(feeder: MoveFeeder) -> tuple[float, float, float]:
    """(cold, cached, after-a-change) median ms of the server's all-topics Metadata v12 handler."""
    from kafka.protocol.metadata import MetadataRequest

    from kafka_sim.handlers import Handlers, RequestContext

    model = feeder.model

    class _Runtime:
        def __init__(self, m) -> None:
            self.model = m
            self.endpoints = {b: ("127.0.0.1", 9000 + b) for b in m.brokers}

        def notify(self) -> None:
            pass

        async def wait_change(self, timeout: float) -> None:
            pass

    handlers = Handlers(_Runtime(model))
    req = MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    ctx = RequestContext(1, 3, 12, 1, "bench")

    def timed() -> float:
        t0 = time.perf_counter()
        handlers.metadata(ctx, req)
        return (time.perf_counter() - t0) * 1e3

    cold = timed()
    cached = statistics.median(timed() for _ in range(20))
    changed = []
    for _ in range(20):
        model.advance_by(1.0)  # moves complete, ISRs change: a few topics are re-encoded
        feeder.top_up()
        changed.append(timed())
    return cold, cached, statistics.median(changed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--brokers", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--moves", type=int, default=500)
    ap.add_argument("--traffic-share", type=float, default=0.10)
    args = ap.parse_args(argv or [])
    from kafka_sim.model import ClusterModel

    t0 = time.perf_counter()
    model = ClusterModel(build_snapshot(args.brokers, args.partitions, args.traffic_share), time_scale=0)
    load_s = time.perf_counter() - t0
    feeder = MoveFeeder(model, args.moves)
    model.set_network(min(model.brokers), 3e6)  # one degraded link: its followers fall behind
    feeder.top_up()
    model.advance_by(1.0)
    fine = cpu_per_sim_minute(feeder, 0.01, 10.0)
    coarse = cpu_per_sim_minute(feeder, 1.0, 120.0)
    in_flight = len(model.list_reassignments())
    urp = sum(1 for t in model.topics.values() for p in t.partitions if len(p.isr) < len(p.replicas))
    cold, warm, changed = metadata_ms(feeder)
    figures = {"brokers": args.brokers, "partitions": args.partitions, "moves_started": args.moves,
               "moves_in_flight_after": in_flight, "under_replicated": urp, "load_s": round(load_s, 2),
               "cpu_s_per_sim_min_10ms_ticks": round(fine, 3), "cpu_s_per_sim_min_1s_ticks": round(coarse, 3),
               "moves_started_total": feeder.started, "metadata_cold_ms": round(cold, 1),
               "metadata_cached_ms": round(warm, 2), "metadata_after_change_ms": round(changed, 2)}
    print(f"sim_physics: {args.brokers} brokers, {args.partitions} partitions, "
          f"{int(args.traffic_share * 100)}% written, {args.moves} throttled moves")
    print(f"  CPU per simulated minute: {fine:.3f} s in 10 ms ticks "
          f"({fine / CPU_BOUND_S_PER_SIM_MIN:.2f}x of {CPU_BOUND_S_PER_SIM_MIN} s bound), "
          f"{coarse:.3f} s in 1 s ticks ({coarse / CPU_BOUND_S_PER_SIM_MIN:.2f}x)")
    print(f"  cached Metadata v12 (all topics): {warm:.2f} ms ({warm / METADATA_BOUND_MS:.2f}x of "
          f"{METADATA_BOUND_MS} ms bound); {changed:.2f} ms when moves changed some partitions "
          f"({changed / METADATA_BOUND_MS:.2f}x; only those are re-encoded); cold {cold:.0f} ms")
    print(f"  {feeder.started} moves started, {in_flight} in flight, {urp} under-replicated partitions")
    print(json.dumps(figures))
    return 0 if warm <= METADATA_BOUND_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
