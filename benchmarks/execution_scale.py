"""Execution at scale, measured in rehearsal (issue 22; ``make bench``).

1. Plans of three shapes from :mod:`benchmarks.scale_shapes` (a generator the executor's defaults
   were not tuned on): a whole rack decommissioned, new empty brokers, hot topics; 20k moves on
   60 brokers and 100k moves on 300 brokers (a move = one KIP-435 step adding one replica). Each
   is rehearsed (:func:`kafka_reassign.rehearsal.rehearse.rehearse`: the real executor against the
   simulator model in virtual time) with the default run parameters (``RUN_DEFAULTS``); printed:
   moves, the fixed-leader and source-free bounds (planning/bounds.py), the predicted moving time
   and its ratio to each, the peak moves in flight on one broker, and the rehearsal's wall and CPU
   seconds against the predicted moving time (``--replan-quantum 0``: the simulator's exact physics
   instead of the rehearsal's 1 s re-plan quantum). The rehearsal is single-threaded work on one core
   (the simulated cluster's server thread only waits on the model's lock): CPU is
   ``time.process_time()`` of the whole process.
2. Per-wake cost at 1k, 10k and 100k steps: what the deferrable execute task does on every wake
   (operators/execute.py ``_wake``), without Airflow: read the run's head and saved state, read the
   pages of steps the window works on (prepare stored them once, a page per XCom), one tick, save
   the state. Printed: CPU ms of the waking thread, bytes read and written, Kafka requests sent.

Run: ``python -m benchmarks.execution_scale [--quick] [--shapes decommission,hot] [--sizes 20000:60]``.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

FIXED_TARGET = 1.05
CPU_TARGET = 0.05
FULL_SIZES = ((20_000, 60), (100_000, 300))
QUICK_SIZES = ((2_000, 60),)
#: Median partition bytes per shape (cold partitions; hot topics are 8x larger): the fixed-leader bound is
#: then 0.5 to 1.5 simulated hours at either size, which keeps the full run's wall time in bounds (the
#: rehearsal's CPU grows with simulated time; smaller partitions mean more moves per simulated hour).
MEDIANS = {"decommission": 1e8, "new-brokers": 1e8, "hot": 1e7}


def _bounds(cluster: Any, throttle: float) -> tuple[float, float]:
    from kafka_reassign.planning.bounds import UniformLimits, partition_copy, source_free_bound, throttle_bound

    copies = [partition_copy(cluster.replicas[i].tolist(), target, int(cluster.sizes[i]), int(cluster.replicas[i][0]))
              for i, target in cluster.moved.items()]
    limits = UniformLimits(throttle)
    return throttle_bound(copies, limits).seconds, source_free_bound(copies, limits).seconds


def rehearse_shape(shape: str, moves: int, brokers: int, seed: int = 7,
                   replan_quantum: float | None = None) -> dict[str, Any]:
    """Generate one plan and rehearse it with the default run parameters.

    :param replan_quantum: the simulator's re-plan quantum (None: the rehearsal's default; 0: exact)
    """
    from benchmarks import scale_shapes as S
    from kafka_reassign.defaults import RUN_DEFAULTS
    from kafka_reassign.rehearsal.rehearse import REPLAN_QUANTUM_S, rehearse

    cluster = S.GENERATORS[shape](brokers, moves, MEDIANS[shape], seed)
    snapshot, plan = S.snapshot(cluster), S.plan(cluster)
    fixed, free = _bounds(cluster, float(RUN_DEFAULTS["throttle_bytes_per_sec"]))  # type: ignore[arg-type]
    cpu0, wall0 = time.process_time(), time.monotonic()
    quantum = REPLAN_QUANTUM_S if replan_quantum is None else replan_quantum
    report = rehearse(snapshot, plan, dict(RUN_DEFAULTS), replan_quantum=quantum)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    pred = report.predicted_seconds
    peak_in = max((p["in"] for p in report.peak_in_flight.values()), default=0)
    peak_out = max((p["out"] for p in report.peak_in_flight.values()), default=0)
    return {"shape": shape, "brokers": brokers, "moves": cluster.moves(), "steps": report.steps,
            "fixed": fixed, "free": free, "report_fixed": report.bound_seconds, "pred": pred,
            "outcome": report.outcome, "quantum": quantum, "peak_in": peak_in, "peak_out": peak_out, "cpu": cpu, "wall": wall}


def _print_rehearsal(r: dict[str, Any]) -> None:
    pred = r["pred"]
    if pred is None:
        print(f"  {r['shape']:<12} {r['moves']:>6} moves / {r['brokers']} brokers: rehearsal did not finish "
              f"({r['outcome']}); {r['wall']:.0f} s wall, {r['cpu']:.0f} s CPU", flush=True)
        return
    fixed_ratio, cpu_ratio = pred / r["fixed"], r["cpu"] / pred
    print(f"  {r['shape']:<12} {r['moves']:>6} moves ({r['steps']} steps) / {r['brokers']:>3} brokers: bounds "
          f"fixed-leader {r['fixed']:.0f} s, source-free {r['free']:.0f} s; predicted {pred:.3f} s = "
          f"{fixed_ratio:.3f}x fixed-leader (target <= {FIXED_TARGET}: {'yes' if fixed_ratio <= FIXED_TARGET else 'NO'}),"
          f" {pred / r['free']:.3f}x source-free; peak in flight per broker in {r['peak_in']} / out {r['peak_out']};"
          f" rehearsal (re-plan quantum {r['quantum']:g} s) {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU = {cpu_ratio:.4f} of the predicted time "
          f"(target < {CPU_TARGET}: {'yes' if cpu_ratio < CPU_TARGET else 'NO'})", flush=True)


def per_wake(n_steps: int, window: int = 1250) -> dict[str, Any]:
    """CPU ms, bytes read/written and requests of one executor wake with a plan of ``n_steps`` steps.

    A wake does what the DAG's execute task does (operators/execute.py): read the run's head and
    saved state, read the pages of steps the window works on (each page an XCom, stored once by
    prepare: here JSON texts), one tick, save the state.

    :param window: the cluster-wide cap (the default max_partition_movements)
    """
    from benchmarks.executor import CountingAdmin
    from benchmarks import scale_shapes as S
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.execution.store import MemoryExecutionStore
    from kafka_reassign.run.paged import PagedRun, page_from_json, pages_json
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.throttle.record import MemoryRecordStore
    from kafka_sim import SimulatedCluster

    cluster = S.new_brokers(60, n_steps, 1e9, 3)
    sim = SimulatedCluster(S.snapshot(cluster), time_scale=1)  # slow moves: the window stays full
    sim.start()
    admin = KafkaAdmin(bootstrap_servers=sim.bootstrap_servers)
    try:
        paged, pages = PagedRun.of(prepare(admin, S.plan(cluster), {"max_partition_movements": window}))
        head_text, page_texts = json.dumps(paged.to_json()), [json.dumps(p) for p in pages_json(pages)]
        counting, store, records = CountingAdmin(admin), MemoryExecutionStore(), MemoryRecordStore()
        rows = []
        for _ in range(8):
            before, cpu0 = counting.requests, time.thread_time()
            read = [len(head_text)]

            def load(k: int) -> list[Any]:
                read[0] += len(page_texts[k])
                return page_from_json(json.loads(page_texts[k]))

            saved_text = store.saved.get("bench")
            ex = PagedRun.from_json(json.loads(head_text)).executor(
                load, "bench", records, saved=json.loads(saved_text) if saved_text else None)
            ex.tick(counting)
            store.save("bench", ex.state_json(), ex.progress().to_json())
            rows.append(((time.thread_time() - cpu0) * 1000, counting.requests - before,
                         read[0] + len(saved_text or ""), len(store.saved["bench"])))
            time.sleep(0.05)
    finally:
        admin.close()
        sim.stop()
    steady = sorted(rows[2:])  # after the first wake submitted the window
    cpu_ms, requests, read_bytes, written = steady[len(steady) // 2]
    return {"steps": paged.book.steps, "cpu_ms": cpu_ms, "requests": requests, "read": read_bytes,
            "written": written, "first_cpu_ms": rows[0][0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2k moves on 60 brokers; per wake at 1k and 10k steps")
    ap.add_argument("--shapes", default="decommission,new-brokers,hot", help="comma-separated shapes")
    ap.add_argument("--sizes", default="", help="moves:brokers,... (default: 20000:60,100000:300)")
    ap.add_argument("--skip-wake", action="store_true", help="only the rehearsals")
    ap.add_argument("--replan-quantum", type=float, default=None,
                    help="virtual seconds copies keep their rates after one catches up (0: re-plan at every event)")
    ap.add_argument("--skip-rehearsal", action="store_true", help="only the per-wake cost")
    args = ap.parse_args(argv if argv is not None else [])
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    sizes = [tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",") if s] or \
        (QUICK_SIZES if args.quick else FULL_SIZES)
    print("Rehearsed moving time with the default run parameters (one core: the rehearsal is single-threaded; "
          "CPU = process_time):", flush=True)
    for moves, brokers in ([] if args.skip_rehearsal else sizes):
        for shape in args.shapes.split(","):
            _print_rehearsal(rehearse_shape(shape, moves, brokers, replan_quantum=args.replan_quantum))
    if not args.skip_wake:
        print("Per wake of the deferrable execute task (read head + saved state + the pages worked on, "
              "one tick, save), median of 6 steady wakes, window 1250, 60 brokers:", flush=True)
        for n in ((1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)):
            r = per_wake(n)
            print(f"  {r['steps']:>6} steps: {r['cpu_ms']:.0f} ms CPU (waking thread; first wake "
                  f"{r['first_cpu_ms']:.0f} ms), read {r['read'] / 1e6:.2f} MB, wrote {r['written'] / 1e6:.2f} MB, "
                  f"{r['requests']} requests", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
