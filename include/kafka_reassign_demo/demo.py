"""``make demo``: one full reassignment, end to end, on a laptop, narrated.

Starts a simulated Kafka cluster (the bundled scenario: 6 brokers over 3 racks, skewed), runs
the real ``kafka_reassign`` DAG in-process with ``dag.test`` (Airflow 3, SQLite metadata DB,
migrated on first use), and prints a progress line at least every few seconds: what the run
is doing, then partitions done / in flight / queued, bytes moved, rate and ETA. It ends with
what moved, the simulated and wall time against the bound the throttle sets, the proof that
every throttle config is back to its prior value (including one an operator had set before
the run), and how to open the run in the Airflow UI.

The plan comes from the Spark planner (goal ``rebalance``); ``--no-planner`` uses a small
built-in plan instead. Airflow is imported only after its environment is set.

Run: ``python -m kafka_reassign_demo [--time-scale 40] [--throttle 60MB/s] [--dry-run]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kafka_reassign.units import format_rate, rate_argument
from kafka_reassign_demo.airflow_home import find_dags_folder, prepare_airflow_home
from kafka_reassign_demo.narration import Narrator, quiet_expected_warnings, say
from kafka_reassign_demo.records import PlanningFiles, RunRecords, RunWatch
from kafka_reassign_demo.report import configs_of, report
from kafka_reassign_demo.scenario import demo_plan, load_scenario


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m kafka_reassign_demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="simulated seconds per wall second (default 1: the moves take the time they would)")
    ap.add_argument("--throttle", type=rate_argument, default=None,
                    help="replication throttle: 60MB/s, 50MiB/s or bytes/s (default 60MB/s; 5MB/s with --real-kafka, "
                         "whose partitions are smaller)")
    ap.add_argument("--airflow-home", default=str(Path.home() / ".cache" / "kafka-reassign" / "demo-airflow"),
                    help="AIRFLOW_HOME for the demo's SQLite metadata DB (default %(default)s)")
    ap.add_argument("--dags-folder", help="the repository's dags/ (default: found beside the package)")
    ap.add_argument("--dry-run", action="store_true", help="validate and print what would be done only")
    ap.add_argument("--no-planner", action="store_true", help="use a small built-in plan instead of Spark")
    ap.add_argument("--real-kafka", action="store_true",
                    help="run on a real local Apache Kafka cluster (kafka-local) instead of the simulator")
    ap.add_argument("--size-scale", type=float, default=0.05,
                    help="with --real-kafka: bytes written per partition = scenario size x this (default 0.05)")
    args = ap.parse_args(argv)
    if args.real_kafka and args.time_scale != 1.0:
        ap.error("--time-scale is the simulator's: a real cluster runs in real time")
    if args.throttle is None:
        args.throttle = 5_000_000 if args.real_kafka else 60_000_000
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    home = Path(args.airflow_home).expanduser().resolve()
    prepare_airflow_home(home, find_dags_folder(args.dags_folder))
    quiet_expected_warnings()
    snapshot = load_scenario()
    if args.real_kafka:
        from kafka_local.demo_cluster import RealDemoCluster

        say(f"Starting a real Apache Kafka cluster (kafka-local: 1 controller, {len(snapshot['brokers'])} broker JVMs) "
            f"and writing the scenario's topics at x{args.size_scale:g} of their size ...")
        cluster: Any = RealDemoCluster(snapshot, home / "kafka-local", size_scale=args.size_scale)
    else:
        from kafka_sim import SimulatedCluster

        cluster = SimulatedCluster(snapshot, time_scale=args.time_scale)
    cluster.start()
    try:
        return _run(cluster, snapshot, args, home)
    finally:
        cluster.stop()


def _set_operator_throttle(cluster: Any, broker: int) -> None:
    """An operator's own throttle, set by another tool before the run: it must survive the run."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.specs import ConfigChange

    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_configs([ConfigChange("broker", str(broker), "leader.replication.throttled.rate", None,
                                          "250000000")])


def _run(cluster: Any, snapshot: dict[str, Any], args: argparse.Namespace, home: Path) -> int:
    if args.real_kafka:
        say(f"Real Apache Kafka 4.3.1 cluster: {len(snapshot['brokers'])} brokers on 3 racks at "
            f"{cluster.bootstrap_servers}")
    else:
        say(f"Simulated Kafka cluster: {len(snapshot['brokers'])} brokers on 3 racks at {cluster.bootstrap_servers} "
            f"(simulated time runs x{args.time_scale:g})")
    os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"] = json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": cluster.bootstrap_servers}})
    os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
    _set_operator_throttle(cluster, snapshot["brokers"][0]["id"])
    before_cfg, before = configs_of(cluster), cluster.snapshot()
    if args.no_planner:
        given = demo_plan(before)
        conf: dict[str, Any] = {"plan": given}
        say(f"Plan: {len(given['partitions'])} partition(s) off the fullest brokers (built-in demo plan)")
    else:
        given, conf = None, {"plan": None, "goal": "rebalance"}
        say("Plan: computed inside the DAG by the Spark planner (goal rebalance, Spark local[2])")
    dag_loaded = False
    conf.update({"throttle_bytes_per_sec": args.throttle, "poll_interval_seconds": 0.5,
                 "move_timeout_minutes": 10, "dry_run": args.dry_run})

    say(f"Running the kafka_reassign DAG (dag.test), throttle {format_rate(args.throttle)} per broker ...")
    records = RunRecords(home / "airflow.db", "kafka_reassign", since=time.time() - 1)
    watch = RunWatch(cluster, before, PlanningFiles(home / "kafka_reassign", given),
                     records.progress)
    narrator = Narrator(lambda: watch() if dag_loaded else "loading the DAGs")
    narrator.start()
    t0 = time.monotonic()
    try:
        from airflow.dag_processing.dagbag import DagBag

        dag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).get_dag("kafka_reassign")
        dag_loaded = True
        dr = dag.test(run_conf=conf)
    finally:
        narrator.stop()
    try:
        final, estimate = records.progress(), records.estimate_seconds()
    except Exception:  # noqa: BLE001 - the report then says less about timing
        final, estimate = None, None
    return report(cluster, dr, before, before_cfg, wall=time.monotonic() - t0, final=(final, estimate),
                   args=args, home=home)


if __name__ == "__main__":
    sys.exit(main())
