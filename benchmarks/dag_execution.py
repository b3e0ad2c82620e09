"""DAG execution benchmark (`make bench`): moving time through the real DAG with default settings.

The ``kafka_reassign`` DAG runs with ``airflow dags test`` in a subprocess (its own AIRFLOW_HOME,
the migrated SQLite template of tests/airflow_env.py, the environment of tests/integration/dag_runner.py)
against the simulator over TCP at time scale 2. Every param is the DAG's default except the plan
and ``throttle_bytes_per_sec`` (25 MB/s). With ``airflow dags test`` the deferred execute task's
trigger runs in the same process as the task (no separate triggerer): a wake costs the task's
re-run, not a scheduler round trip.

Measured from the cluster's side: an observer thread (its own admin client, its own client id)
lists the reassignments in flight every few milliseconds. Moving phase = first step in flight to
last step done, in simulated seconds; idle = time inside it with nothing in flight. It is divided
by the fixed-leader and the source-free throttle bounds (planning/bounds.py). Requests the DAG
sent to the cluster during the moving phase come from the simulator's per-API counters, divided
by the phase's wall seconds. Cases: every partition of an RF-3 topic moved from brokers 1-3 to
4-6: 3,000 partitions of 1-10 MB, and 24 partitions of lognormal size (median 200 MB).

Run: ``python -m benchmarks.dag_execution [--quick]`` (``--quick``: only the 24-partition case).
"""
from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.executor import THROTTLE, Observer, lognormal_sizes, rf3_snapshot, throttle_bounds

TIME_SCALE = 2.0
TARGET = 1.30
#: The observer's client id, so its own listings are not counted as the DAG's requests.
OBSERVER_CLIENT = "bench-observer"
API_NAMES = {46: "ListPartitionReassignments", 45: "AlterPartitionReassignments", 35: "DescribeLogDirs",
             32: "DescribeConfigs", 44: "IncrementalAlterConfigs", 3: "Metadata", 60: "DescribeCluster",
             43: "ElectLeaders", 18: "ApiVersions"}
#: Seconds a DAG run may take before the benchmark gives up on it.
DAG_TIMEOUT = 3600.0
#: `airflow dags test kafka_reassign -c CONF` with CONF read from a file: a 3,000-partition plan is
#: longer than one command-line argument may be (Linux: 128 kB).
LAUNCH = ("import sys; from airflow.__main__ import main; conf = open(sys.argv[1]).read(); "
          "sys.argv = ['airflow', 'dags', 'test', 'kafka_reassign', '-c', conf]; sys.exit(main())")


class FlightObserver(Observer):
    """The executor benchmark's observer, which also notes when each step appears and leaves the listing."""

    def __init__(self, cluster: Any, interval: float = 0.003) -> None:
        from kafka_reassign.cluster.admin import KafkaAdmin

        super().__init__(cluster, interval)
        self.admin.close()
        self.admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, client_id=OBSERVER_CLIENT)
        self.submitted: list[float] = []
        self.ended: list[float] = []

    def run(self) -> None:
        seen: set[tuple[str, int]] = set()
        while not self.stop_event.is_set():
            now_in_flight = set(self.admin.list_partition_reassignments(None))
            at = self.cluster.sim_time()
            self.samples.append((at, len(now_in_flight)))
            self.submitted.extend(at for _ in now_in_flight - seen)
            self.ended.extend(at for _ in seen - now_in_flight)
            seen = now_in_flight
            time.sleep(self.interval)
        self.admin.close()

    def refill_gap(self) -> tuple[float, int]:
        """(mean simulated seconds from a step's end to the next submission after it, ends counted)."""
        starts = sorted(self.submitted)
        gaps, k = [], 0
        for end in sorted(self.ended):
            while k < len(starts) and starts[k] < end:
                k += 1
            if k == len(starts):
                break  # no submission after this end: the tail of the run
            gaps.append(starts[k] - end)
        return (sum(gaps) / len(gaps) if gaps else 0.0), len(gaps)


class RequestSampler(threading.Thread):
    """Copies the simulator's request counters with the simulated time, every ``interval`` s."""

    def __init__(self, cluster: Any, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.interval = interval
        self.samples: list[tuple[float, dict[tuple[int, str | None], int]]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.samples.append((self.cluster.sim_time(), self.cluster.request_counts))
            time.sleep(self.interval)

    def delta(self, start: float, end: float) -> dict[int, int]:
        """API key -> requests sent by anyone but the observer between the samples around [start, end]."""
        before = [c for t, c in self.samples if t <= start] or [self.samples[0][1]]
        after = [c for t, c in self.samples if t >= end] or [self.samples[-1][1]]
        out: dict[int, int] = {}
        for (api, client), n in after[0].items():
            if client != OBSERVER_CLIENT:
                out[api] = out.get(api, 0) + n - before[-1].get((api, client), 0)
        return {api: n for api, n in out.items() if n}


def bounds(cluster: Any, plan: dict[str, Any]) -> tuple[float, float, int]:
    """(fixed-leader bound, source-free bound, steps) of ``plan`` as the DAG's prepare would see it."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.run.prepare import prepare

    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, client_id=OBSERVER_CLIENT)
    try:  # prepare writes nothing
        prepared = prepare(admin, plan, {"throttle_bytes_per_sec": THROTTLE, "produce_sample_seconds": 0})
    finally:
        admin.close()
    fixed, free = throttle_bounds(prepared)
    return fixed, free, len(prepared.steps)


def _stamp(line: str) -> float:
    """Unix time of an Airflow log line (it starts with an ISO timestamp)."""
    from datetime import datetime

    return datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00")).timestamp()


def wake_counts(log: str) -> dict[str, Any]:
    """Trigger events, progress tables and steps in flight from the DAG log, and the wake latency:
    seconds from a trigger's event to the woken task's progress table (the task's re-run)."""
    lines = log.splitlines()
    events = [_stamp(x) for x in lines if "Trigger completed" in x]
    tables = [_stamp(x) for x in lines if "Progress (poll" in x]
    latency = []
    for fired in events:
        after = [t for t in tables if t >= fired]
        if after:
            latency.append(after[0] - fired)
    return {"events": len(events), "tables": len(tables), "latency": latency,
            "in_flight": [int(m) for m in re.findall(r"(\d+) in flight,", log)]}


def start_dag(runner: Any, conf: dict[str, Any], name: str) -> subprocess.Popen:
    """Start `airflow dags test kafka_reassign` as tests/integration/dag_runner.py does, the conf passed by file."""
    conf_path = runner.home / f"{name}.conf.json"
    conf_path.write_text(json.dumps(conf))
    with open(runner.home / f"{name}.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-c", LAUNCH, str(conf_path)], env=runner.env(), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def run_case(name: str, sizes: list[int], home: Path) -> dict[str, Any]:
    """Run the DAG on one plan and measure it from the cluster's side."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
    from dag_runner import DagRunner, kill_group
    from kafka_sim import SimulatedCluster

    cluster = SimulatedCluster(rf3_snapshot(sizes), time_scale=TIME_SCALE)
    cluster.start()
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [4 + (p + i) % 3 for i in range(3)]}
                                         for p in range(len(sizes))]}
    observer, sampler = FlightObserver(cluster), RequestSampler(cluster)
    try:
        bound, free, steps = bounds(cluster, plan)
        runner = DagRunner(home / name, cluster.bootstrap_servers)
        observer.start()
        sampler.start()
        t0 = time.monotonic()
        proc = start_dag(runner, {"plan": plan, "throttle_bytes_per_sec": THROTTLE}, name)
        try:
            rc = proc.wait(timeout=DAG_TIMEOUT)
        except BaseException:
            kill_group(proc)
            raise
        wall = time.monotonic() - t0
        time.sleep(0.05)
    finally:
        observer.stop_event.set()
        sampler.stop_event.set()
        observer.join(5)
        sampler.join(5)
        cluster.stop()
    log_path = home / name / f"{name}.log"
    log = log_path.read_text(errors="replace")
    phase, idle = observer.phase()
    busy = [t for t, n in observer.samples if n > 0]
    requests = sampler.delta(busy[0], busy[-1]) if busy else {}
    wakes = wake_counts(log)
    gap, ends = observer.refill_gap()
    return {"case": name, "partitions": len(sizes), "steps": steps, "rc": rc, "bound_s": bound, "free_s": free,
            "moving_s": phase, "idle_s": idle, "wall_s": wall, "phase_wall_s": phase / TIME_SCALE,
            "requests": requests, "wakes": wakes,
            "refill_gap_s": gap, "gap_ends": ends, "log": log_path}


def report(r: dict[str, Any]) -> float:
    """Print one case; returns its ratio to the fixed-leader bound."""
    ratio, free_ratio = r["moving_s"] / r["bound_s"], r["moving_s"] / r["free_s"]
    print(f"  {r['case']}: {r['partitions']} partitions, {r['steps']} steps, DAG exit code {r['rc']}, "
          f"wall {r['wall_s']:.0f} s (whole DAG run)", flush=True)
    print(f"    moving {r['moving_s']:.1f} sim-s (idle {r['idle_s']:.1f} sim-s); fixed-leader bound "
          f"{r['bound_s']:.1f} s -> ratio {ratio:.2f} (target <= {TARGET}); source-free bound "
          f"{r['free_s']:.1f} s -> ratio {free_ratio:.2f}")
    wall = r["phase_wall_s"] or 1.0
    per_api = ", ".join(f"{API_NAMES.get(k, k)} {n / wall:.2f}" for k, n in sorted(r["requests"].items()))
    total = sum(r["requests"].values())
    print(f"    requests to the cluster per wall second over the moving phase ({wall:.0f} wall s): "
          f"total {total / wall:.2f} ({total} requests): {per_api}")
    wakes = r["wakes"]
    flight, latency = wakes["in_flight"], wakes["latency"]
    window = f"{min(flight)}-{max(flight)}, mean {sum(flight) / len(flight):.1f}" if flight else "not logged"
    lat = f"mean {sum(latency) / len(latency):.2f} s, max {max(latency):.2f} s" if latency else "n/a"
    print(f"    execute-task wakes: {wakes['events']} trigger events, {wakes['tables']} progress tables logged; "
          f"trigger event -> task's progress table (wall): {lat}; steps in flight per progress line: {window}")
    if r["rc"] != 0:
        print("    THE DAG RUN DID NOT FINISH: the moving phase and the ratios cover only part of the plan "
              f"(see the progress lines in {r['log']})")
    print(f"    step end -> next submission: mean {r['refill_gap_s']:.2f} sim-s over {r['gap_ends']} ends; "
          f"DAG log: {r['log']}", flush=True)
    return ratio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the 24-partition case")
    ap.add_argument("--case", choices=("lognormal-24", "small-3000"), help="run only this case")
    args = ap.parse_args(argv if argv is not None else [])
    import logging

    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    cases = [("lognormal-24", lognormal_sizes(24, 200e6, 0.8, 11)),
             ("small-3000", [random.Random(5 + i).randint(1_000_000, 10_000_000) for i in range(3000)])]
    if args.quick:
        cases = cases[:1]
    if args.case:
        cases = [c for c in cases if c[0] == args.case]
    print(f"The kafka_reassign DAG through `airflow dags test` (the trigger runs in the same process), default "
          f"params except the plan and a {THROTTLE / 1e6:g} MB/s throttle. Simulator figures at time scale "
          f"{TIME_SCALE:g} (simulated seconds per wall second), measured from the cluster's side:", flush=True)
    home = Path(tempfile.mkdtemp(prefix="bench-dag-execution-"))
    worst = 0.0
    for name, sizes in cases:
        worst = max(worst, report(run_case(name, sizes, home)))
    print(f"worst ratio to the fixed-leader bound: {worst:.2f} ({'OK' if worst <= TARGET else 'ABOVE TARGET'})")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
