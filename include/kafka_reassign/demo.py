"""``make demo``: one full reassignment, end to end, on a laptop.

Starts the simulated Kafka cluster of ``scenarios/demo.json`` (6 brokers over 3 racks, skewed),
runs the real ``kafka_reassign`` DAG in-process with ``dag.test`` (Airflow 3, SQLite metadata
DB under ``./airflow_home``, migrated automatically on first use) and prints the placement
before and after, the time taken and the proof that every throttle config is back to its
prior value, including a throttle an operator had set before the run.

The plan comes from the Spark planner (goal ``rebalance``) when it is installed; otherwise a
simple demo plan moves the biggest replicas off the most loaded broker.

Run: ``python -m kafka_reassign.demo [--time-scale 40] [--throttle 60000000] [--dry-run]``.
Airflow is imported only after its environment is set, so this module must not import it at
the top.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "demo.json"


def prepare_airflow_home(home: Path) -> None:
    """Point Airflow at ``home`` (SQLite, this project's dags/, no examples) and migrate once.

    :param home: the AIRFLOW_HOME to use (created)
    """
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING"),
    })
    marker = home / ".migrated"
    if not marker.exists():
        print(f"Preparing the Airflow metadata DB in {home} (airflow db migrate, once) ...", flush=True)
        airflow_bin = Path(sys.executable).parent / "airflow"
        subprocess.run([str(airflow_bin), "db", "migrate"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=900)
        marker.write_text("ok\n")


def load_scenario() -> dict[str, Any]:
    """The bundled scenario, or a generated one when the file is missing."""
    if SCENARIO.exists():
        return json.loads(SCENARIO.read_text())
    from kafka_sim.generate import GenerateOptions, generate_snapshot

    return generate_snapshot(GenerateOptions(brokers=6, racks=3, topics=4, partitions=6,
                                             replication_factor=3, skew=0.6, seed=7))


def broker_bytes(snapshot: dict[str, Any]) -> dict[int, int]:
    """Bytes stored per broker (sum of its replicas' sizes)."""
    out = {b["id"]: 0 for b in snapshot["brokers"]}
    for t in snapshot["topics"]:
        for p in t["partitions"]:
            for r in p["replicas"]:
                out[r] = out.get(r, 0) + int(p.get("size_bytes", 0))
    return out


def demo_plan(snapshot: dict[str, Any], moves: int = 6) -> dict[str, Any]:
    """A small rack-aware plan moving replicas from the fullest brokers to the emptiest ones.

    Used when the Spark planner is not installed; a greedy demonstration, not the planner:
    each move takes a replica off the currently fullest broker to the emptiest broker of a
    rack the partition does not use yet, and only when that narrows the gap between the two.

    :param snapshot: cluster snapshot
    :param moves: at most this many partitions to move
    """
    rack = {b["id"]: b.get("rack") for b in snapshot["brokers"]}
    load = broker_bytes(snapshot)
    current = {(t["name"], p["partition"]): (list(p["replicas"]), int(p.get("size_bytes", 0)))
               for t in snapshot["topics"] for p in t["partitions"]}
    chosen: dict[tuple[str, int], list[int]] = {}
    while len(chosen) < moves:
        best = None
        for src in sorted(load, key=lambda b: -load[b]):
            for key, (replicas, size) in sorted(current.items(), key=lambda kv: -kv[1][1]):
                if key in chosen or src not in replicas or size == 0:
                    continue
                used_racks = {rack[r] for r in replicas if r != src}
                for dst in sorted((b for b in load if b not in replicas and rack[b] not in used_racks),
                                  key=lambda b: load[b]):
                    # Only moves that narrow the gap (no overshoot past each other).
                    if load[dst] + size < load[src]:
                        best = (key, src, dst, size)
                    break
                if best:
                    break
            if best:
                break
        if best is None:
            break
        key, src, dst, size = best
        replicas = [dst if r == src else r for r in current[key][0]]
        chosen[key] = replicas
        load[src] -= size
        load[dst] += size
    entries = [{"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
               for (t, p), r in sorted(chosen.items())]
    return {"version": 1, "partitions": entries}


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def configs_of(cluster: Any) -> dict[str, dict[str, str]]:
    snap = cluster.snapshot()
    out = {f"broker {b['id']}": dict(cluster.broker_configs(b["id"])) for b in snap["brokers"]}
    out.update({f"topic {t['name']}": dict(cluster.topic_configs(t["name"])) for t in snap["topics"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafka_reassign.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-scale", type=float, default=40.0, help="simulated seconds per wall second")
    ap.add_argument("--throttle", type=int, default=60_000_000, help="replication throttle, bytes/s")
    ap.add_argument("--airflow-home", default=str(ROOT / "airflow_home"))
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--no-planner", action="store_true", help="use the demo plan even if Spark is available")
    args = ap.parse_args(argv)

    prepare_airflow_home(Path(args.airflow_home))
    from kafka_sim import SimulatedCluster

    snapshot = load_scenario()
    cluster = SimulatedCluster(snapshot, time_scale=args.time_scale)
    cluster.start()
    try:
        return _run(cluster, snapshot, args)
    finally:
        cluster.stop()


def _run(cluster: Any, snapshot: dict[str, Any], args: argparse.Namespace) -> int:
    print(f"Simulated Kafka cluster: {len(snapshot['brokers'])} brokers at {cluster.bootstrap_servers} "
          f"(time x{args.time_scale:g})", flush=True)
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": cluster.bootstrap_servers}})

    # An operator's own throttle, set by another tool before the run: it must survive it.
    from kafka_reassign.admin import KafkaAdmin
    from kafka_reassign.throttle import ConfigChange

    first = snapshot["brokers"][0]["id"]
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_configs([ConfigChange("broker", str(first), "leader.replication.throttled.rate", None,
                                          "250000000")])
    before_cfg = configs_of(cluster)
    before_snap = cluster.snapshot()

    try:
        from kafka_reassign import planner
        use_planner = hasattr(planner, "plan") and not args.no_planner
    except ImportError:
        use_planner = False
    if use_planner:
        conf: dict[str, Any] = {"plan": None, "goal": "rebalance"}
        print("Plan: computed by the Spark planner (goal rebalance) inside the DAG", flush=True)
    else:
        plan = demo_plan(before_snap)
        conf = {"plan": plan}
        print(f"Plan: {len(plan['partitions'])} partition(s) off the fullest broker "
              "(demo plan; the Spark planner is not installed)", flush=True)
    conf.update({"throttle_bytes_per_sec": args.throttle, "max_partition_movements": 3,
                 "max_movements_per_broker": 2, "poll_interval_seconds": 0.5,
                 "batch_timeout_minutes": 10, "dry_run": args.dry_run})

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(ROOT / "dags"))
    dag = bag.get_dag("kafka_reassign")
    if dag is None:
        print(f"kafka_reassign did not load: {bag.import_errors}", file=sys.stderr)
        return 1
    print("Running the kafka_reassign DAG with dag.test (task logs follow) ...", flush=True)
    t0 = time.monotonic()
    dr = dag.test(run_conf=conf)
    took = time.monotonic() - t0

    after_snap = cluster.snapshot()
    after_cfg = configs_of(cluster)
    print("\n" + "=" * 78)
    print(f"kafka_reassign run {dr.run_id}: {str(getattr(dr.state, 'value', dr.state)).upper()} "
          f"in {took:.1f} s wall ({cluster.sim_time():.0f} s simulated)")
    moved = []
    before_p = {(t["name"], p["partition"]): p["replicas"] for t in before_snap["topics"] for p in t["partitions"]}
    for t in after_snap["topics"]:
        for p in t["partitions"]:
            old = before_p[(t["name"], p["partition"])]
            if old != p["replicas"]:
                moved.append((f"{t['name']}-{p['partition']}", old, p["replicas"], p.get("size_bytes", 0)))
    print(f"\nPlacement changes ({len(moved)} partition(s)):")
    for name, old, new, size in moved:
        print(f"  {name:<22} {str(old):<12} -> {str(new):<12} {_fmt_bytes(size)}")
    lb, la = broker_bytes(before_snap), broker_bytes(after_snap)
    print("\nBytes per broker (before -> after):")
    for b in sorted(lb):
        print(f"  broker {b}: {_fmt_bytes(lb[b]):>10} -> {_fmt_bytes(la[b]):>10}")
    print("\nDynamic configs, before the run -> after it:")
    same = True
    for res in sorted(set(before_cfg) | set(after_cfg)):
        b, a = before_cfg.get(res, {}), after_cfg.get(res, {})
        if b or a:
            flag = "" if a == b else "   <-- DIFFERENT"
            same = same and a == b
            print(f"  {res}: {b} -> {a}{flag}")
    print("\nThrottles back to their prior values: " + ("YES" if same else "NO"))
    print(f"Writes the simulator accepted: {dict(cluster.writes)}")
    print("=" * 78)
    ok = str(getattr(dr.state, "value", dr.state)) == "success" and same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
