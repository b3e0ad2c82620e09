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
import logging
import os
import subprocess
import sys
import threading
import time
import warnings
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from kafka_reassign.units import fmt_bytes, format_duration, format_rate, rate_argument

#: The bundled scenario, shipped inside the package (no repository needed once installed).
SCENARIO = "demo_scenario.json"
#: Seconds between narration lines while the DAG runs (the issue's bound is 10).
NARRATION_INTERVAL = 5.0


def load_scenario() -> dict[str, Any]:
    """The bundled demo scenario (package data)."""
    return json.loads(resources.files("kafka_reassign_demo").joinpath(SCENARIO).read_text(encoding="utf-8"))


def find_dags_folder(given: str | None) -> Path:
    """The folder holding ``kafka_reassign_dag.py``: ``--dags-folder``, else the checkout's ``dags/``.

    :param given: the ``--dags-folder`` value, if any
    :raises SystemExit: naming what to pass when neither exists
    """
    candidates = [Path(given)] if given else [Path(__file__).resolve().parents[2] / "dags", Path.cwd() / "dags"]
    for folder in candidates:
        if (folder / "kafka_reassign_dag.py").is_file():
            return folder.resolve()
    raise SystemExit(f"demo: no kafka_reassign_dag.py in {', '.join(map(str, candidates))}; "
                     "pass --dags-folder DIR (the repository's dags/)")


def prepare_airflow_home(home: Path, dags: Path) -> None:
    """Point Airflow at ``home`` (SQLite, ``dags``, no examples) and migrate the DB once.

    The settings also go to ``home/airflow.cfg``, so ``AIRFLOW_HOME=<home> airflow api-server``
    shows the demo's runs afterwards.

    :param home: the AIRFLOW_HOME to use (created)
    :param dags: the DAGs folder
    """
    home.mkdir(parents=True, exist_ok=True)
    settings = {
        ("core", "dags_folder"): str(dags), ("core", "load_examples"): "False",
        ("core", "simple_auth_manager_all_admins"): "True",
        ("database", "sql_alchemy_conn"): f"sqlite:///{home}/airflow.db",
        ("logging", "logging_level"): os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING"),
    }
    os.environ["AIRFLOW_HOME"] = str(home)
    for (section, key), value in settings.items():
        os.environ[f"AIRFLOW__{section.upper()}__{key.upper()}"] = value
    cfg = "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for (s2, k), v in settings.items() if s2 == s) + "\n"
                  for s in dict.fromkeys(s for s, _ in settings))
    (home / "airflow.cfg").write_text(cfg, encoding="utf-8")
    marker = home / ".migrated"
    if not marker.exists():
        say(f"Preparing the Airflow metadata DB in {home} (airflow db migrate, once; about 20 s) ...")
        airflow_bin = Path(sys.executable).parent / "airflow"
        narrator = Narrator(lambda: "still migrating the Airflow metadata DB ...")
        narrator.start()
        try:
            subprocess.run([str(airflow_bin), "db", "migrate"], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=900)
        finally:
            narrator.stop()
        marker.write_text("ok\n")


class _DropMessages(logging.Filter):
    """Drops log records whose message starts with one of ``prefixes``."""

    def __init__(self, *prefixes: str) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)


def quiet_expected_warnings() -> None:
    """Hide warnings that are expected in a dag.test demo and would alarm a first-time user.

    - ``No tasks to run. unrunnable tasks``: dag.test's loop while a task is deferred or
      waiting for its reschedule time (a scheduler would simply wait).
    - ``Plugin ... already registered``: the plugin is found both as an installed entry
      point and through the DAG bag.
    - ``empty cryptography key``: the demo's throwaway SQLite DB stores Variables unencrypted.
    - Deprecation notices of third-party libraries (starlette's test client that dag.test uses).
    """
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
    warnings.filterwarnings("ignore", message=r"Using `httpx` with `starlette\.testclient` is deprecated")
    logging.getLogger("airflow.sdk.definitions.dag").addFilter(_DropMessages("No tasks to run"))
    logging.getLogger("airflow.plugins_manager").addFilter(_DropMessages("Plugin %s already registered",
                                                                         "Plugin '"))
    logging.getLogger("airflow.models.crypto").addFilter(_DropMessages("empty cryptography key"))
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


_T0 = time.monotonic()
_LAST_SAID = [time.monotonic()]


def say(text: str) -> None:
    """Print one narration line, stamped with the seconds since the demo started."""
    print(f"[{time.monotonic() - _T0:5.0f} s] {text}", flush=True)
    _LAST_SAID[0] = time.monotonic()


class Narrator:
    """Prints the latest status line every ``interval`` seconds until stopped.

    Two daemon threads: one refreshes the status (``status()`` may wait on the metadata DB or
    on the import lock while the DAG's tasks import their modules), the other only prints the
    latest line, so a slow refresh never makes the demo go silent.

    :param status: returns the line to print (it is called from a worker thread)
    :param interval: seconds between lines
    """

    def __init__(self, status: Callable[[], str], interval: float = NARRATION_INTERVAL) -> None:
        self.status, self.interval = status, interval
        self.latest = ("starting", time.monotonic())
        self._stop_event = threading.Event()
        self._threads = [threading.Thread(target=self._refresh, name="demo-status", daemon=True),
                         threading.Thread(target=self._print, name="demo-narrator", daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _refresh(self) -> None:
        while not self._stop_event.is_set():
            try:
                line = self.status()
            except Exception as exc:  # a narration failure must not end the demo
                line = f"(status unavailable: {exc})"
            if line != self.latest[0]:
                self.latest = (line, time.monotonic())
            self._stop_event.wait(1.0)

    def _print(self) -> None:
        while not self._stop_event.wait(max(0.2, self.interval - (time.monotonic() - _LAST_SAID[0]))):
            if time.monotonic() - _LAST_SAID[0] >= self.interval - 0.2:
                line, since = self.latest
                age = time.monotonic() - since
                say(line if age < self.interval else f"{line} (for {format_duration(age)})")

    def stop(self) -> None:
        self._stop_event.set()
        for t in self._threads:
            t.join(timeout=5)


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


def configs_of(cluster: Any) -> dict[str, dict[str, str]]:
    snap = cluster.snapshot()
    out = {f"broker {b['id']}": dict(cluster.broker_configs(b["id"])) for b in snap["brokers"]}
    out.update({f"topic {t['name']}": dict(cluster.topic_configs(t["name"])) for t in snap["topics"]})
    return out




def throttle_bound_seconds(before: dict[str, Any], after: dict[str, Any], throttle: float) -> float:
    """The least time the moves between two snapshots can take under a KIP-73 throttle.

    Each new replica is copied from the partition's leader: the bytes sent by each leader
    and received by each new follower are each capped at ``throttle`` per second, so no
    schedule beats the busiest broker's bytes / throttle.

    :param before: snapshot before the run
    :param after: snapshot after it
    :param throttle: replication throttle, bytes/s
    """
    old = {(t["name"], p["partition"]): p for t in before["topics"] for p in t["partitions"]}
    sent: dict[int, float] = {}
    received: dict[int, float] = {}
    for t in after["topics"]:
        for p in t["partitions"]:
            prev = old[(t["name"], p["partition"])]
            size = float(prev.get("size_bytes", 0))
            for b in set(p["replicas"]) - set(prev["replicas"]):
                received[b] = received.get(b, 0.0) + size
                sent[prev["leader"]] = sent.get(prev["leader"], 0.0) + size
    busiest = max([*sent.values(), *received.values(), 0.0])
    return busiest / throttle


def moved_partitions(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, list[int], list[int], int]]:
    """(name, replicas before, replicas after, size) of every partition whose replicas changed."""
    old = {(t["name"], p["partition"]): p["replicas"] for t in before["topics"] for p in t["partitions"]}
    return [(f"{t['name']}-{p['partition']}", old[(t["name"], p["partition"])], p["replicas"],
             int(p.get("size_bytes", 0)))
            for t in after["topics"] for p in t["partitions"] if old[(t["name"], p["partition"])] != p["replicas"]]


class RunWatch:
    """The narration's status line: the run's phase, then the executor's own progress.

    While the moves run, the line is the :class:`~kafka_reassign.execution.progress.ProgressView`
    the execute task saves after every poll (the numbers the UI and ``kafka-reassign status``
    show). Before that, the phase is read from the planning files and the cluster's configs.

    :param cluster: the running :class:`kafka_sim.SimulatedCluster`
    :param before: its snapshot before the run
    :param files: the run's planning files (snapshot, plan)
    :param progress: returns the run's saved ProgressView, or None before the first poll
    """

    def __init__(self, cluster: Any, before: dict[str, Any], files: "PlanningFiles",
                 progress: Callable[[], Any]) -> None:
        self.cluster, self.files, self.progress = cluster, files, progress
        self.before = {(t["name"], p["partition"]): p for t in before["topics"] for p in t["partitions"]}
        self.brokers = sorted({b for p in self.before.values() for b in p["replicas"]})
        self._seen: tuple[float, int] | None = None   # (time, bytes moved) of the first view

    def _with_rate(self, view: Any) -> Any:
        """Fill in the rate and ETA, from the bytes moved since the first view, when the view has none."""
        now = time.time()
        if self._seen is None:
            self._seen = (now, view.bytes_moved)
        elif view.rate_bytes_per_sec is None and now > self._seen[0] and view.bytes_moved > self._seen[1]:
            view.rate_bytes_per_sec = (view.bytes_moved - self._seen[1]) / (now - self._seen[0])
            view.eta_seconds = view.bytes_left / view.rate_bytes_per_sec
        return view

    def __call__(self) -> str:
        try:
            view = self.progress()
        except Exception:  # the metadata DB is busy (SQLite): say what the cluster shows instead
            view = None
        if view is not None and view.steps_total:
            if not view.finished:
                return "moving: " + self._with_rate(view).summary()
            return (f"moves {view.outcome.replace('_', ' ')}: {view.steps_done}/{view.steps_total} steps done; "
                    "restoring the throttles and checking the result")
        throttled = any("follower.replication.throttled.rate" in self.cluster.broker_configs(b) for b in self.brokers)
        if throttled:
            return "throttle set (prior values recorded first); submitting the first moves"
        plan = self.files.plan()
        if plan:
            copy = sum(self.before[(e["topic"], e["partition"])].get("size_bytes", 0)
                       * len(set(e["replicas"]) - set(self.before[(e["topic"], e["partition"])]["replicas"]))
                       for e in plan.get("partitions", []) if (e["topic"], e["partition"]) in self.before)
            return (f"plan ready: {len(plan.get('partitions', []))} partition moves, {fmt_bytes(copy)} to copy; "
                    "validating it against the cluster")
        taken = self.files.snapshot_taken_at()
        if taken is None:
            return "reading the cluster (snapshot task)"
        return f"planning the rebalance on Spark (local[2]) for {format_duration(time.time() - taken)}"


class RunRecords:
    """What the run saved in the demo's SQLite metadata DB, read-only: its progress and estimate.

    Read straight from the file: the narration runs in its own thread and must not use
    Airflow's Task SDK, which belongs to the task dag.test is running.

    :param db: the SQLite metadata DB
    :param dag_id: the DAG whose newest run (started after ``since``) is read
    """

    def __init__(self, db: Path, dag_id: str, since: float) -> None:
        from datetime import datetime, timezone

        self.db, self.dag_id = db, dag_id
        self.since = datetime.fromtimestamp(since, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        self.run_id: str | None = None

    def _json(self, sql: str, key: str) -> Any:
        """``sql``'s one JSON value for (``key``, the run), or None before the run exists."""
        import sqlite3

        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=0.5) as con:
            if self.run_id is None:
                row = con.execute("SELECT run_id FROM dag_run WHERE dag_id = ? AND start_date >= ? "
                                  "ORDER BY start_date DESC LIMIT 1", (self.dag_id, self.since)).fetchone()
                if row is None:
                    return None
                self.run_id = row[0]
            row = con.execute(sql, (key(self.run_id) if callable(key) else key, self.run_id)).fetchone()
        return json.loads(row[0]) if row else None

    def progress(self) -> Any:
        """The ProgressView the execute task saved last, or None."""
        from kafka_reassign.execution.progress import ProgressView
        from kafka_reassign_airflow.record_store import VariableExecutionStore

        saved = self._json("SELECT val FROM variable WHERE key = ? AND ? IS NOT NULL",
                           VariableExecutionStore().key_for)
        return ProgressView.from_json(saved["progress"]) if saved and saved.get("progress") else None

    def estimate_seconds(self) -> float | None:
        """The moving time the prepare task estimated, or None."""
        summary = self._json("SELECT value FROM xcom WHERE task_id = 'prepare' AND key = ? AND run_id = ?",
                             "return_value")
        return (summary or {}).get("estimated_seconds")


class PlanningFiles:
    """The run's planning directory as the planning tasks fill it (snapshot, then the plan).

    :param work_dir: ``[kafka_reassign] work_dir`` (the demo's ``<AIRFLOW_HOME>/kafka_reassign``)
    :param given: the plan given in the run's conf (no planning), or None
    """

    def __init__(self, work_dir: Path, given: dict[str, Any] | None = None) -> None:
        from kafka_reassign_airflow.operators.planning import PLAN_FILE, SNAPSHOT_FILE

        self.work_dir, self.given = work_dir, given
        self.names = (SNAPSHOT_FILE, PLAN_FILE)
        self.started = time.time()
        self._plan = given

    def _newest(self, name: str) -> Path | None:
        files = [f for f in self.work_dir.glob(f"kafka_reassign/*/{name}") if f.stat().st_mtime >= self.started]
        return max(files, key=lambda f: f.stat().st_mtime) if files else None

    def snapshot_taken_at(self) -> float | None:
        snap = self._newest(self.names[0])
        return snap.stat().st_mtime if snap else None

    def plan(self) -> dict[str, Any] | None:
        if self._plan is None and (found := self._newest(self.names[1])) is not None:
            self._plan = json.loads(found.read_text(encoding="utf-8"))
        return self._plan


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
    return _report(cluster, dr, before, before_cfg, wall=time.monotonic() - t0, final=(final, estimate),
                   args=args, home=home)


def _timing(before: dict[str, Any], after: dict[str, Any], wall: float, final: Any, throttle: float,
            scale: float, real: bool = False) -> str:
    """Wall and simulated time of the moves against the least time the throttle allows and the estimate.

    :param final: (the run's last ProgressView or None, prepare's estimated seconds or None)
    """
    final, estimate = final
    bound = throttle_bound_seconds(before, after, throttle)
    out = f"\nTime: {format_duration(wall)} wall for the whole DAG run (snapshot, planning, checks included)."
    if final is not None and final.first_submit_at and final.updated_at:
        moving = max(0.0, final.updated_at - final.first_submit_at) * scale
        clock = "on the real cluster" if real else "simulated"
        out += (f"\nMoves: {format_duration(moving)} on the real cluster, from the first submission to the last step done."
                if real else
                f"\nMoves: {format_duration(moving / scale)} wall = {format_duration(moving)} simulated (x{scale:g}), "
                f"from the first submission to the last step done.")
        if bound:
            out += (f"\nThe throttle bound ({format_rate(throttle)} per broker; the busiest broker's bytes / throttle) "
                    f"is {format_duration(bound)} {clock}: the run took {moving / bound:.2f}x that bound.")
        if estimate:
            out += (f"\nEstimated before the run (prepare): {format_duration(estimate)}; "
                    f"the moves took {format_duration(moving)}, {(moving - estimate) / estimate:+.0%} against it.")
    return out


def _report(cluster: Any, dr: Any, before: dict[str, Any], before_cfg: dict[str, dict[str, str]], *,
            wall: float, final: Any, args: argparse.Namespace, home: Path) -> int:
    after, after_cfg = cluster.snapshot(), configs_of(cluster)
    state = str(getattr(dr.state, "value", dr.state))
    moved = moved_partitions(before, after)
    print("\n" + "=" * 78)
    print(f"Run {dr.run_id}: {state.upper()}")
    print(f"\nWhat moved ({len(moved)} partition(s), {fmt_bytes(sum(m[3] for m in moved))} of partitions):")
    for name, old, new, size in moved:
        print(f"  {name:<22} {str(old):<12} -> {str(new):<12} {fmt_bytes(size)}")
    lb, la = broker_bytes(before), broker_bytes(after)
    print("\nBytes per broker (before -> after):")
    for b in sorted(lb):
        print(f"  broker {b}: {fmt_bytes(lb[b]):>10} -> {fmt_bytes(la[b]):>10}")
    print(_timing(before, after, wall, final, args.throttle, args.time_scale, real=args.real_kafka))
    same = True
    print("\nDynamic configs, before the run -> after it:")
    for res in sorted(set(before_cfg) | set(after_cfg)):
        b, a = before_cfg.get(res, {}), after_cfg.get(res, {})
        if b or a:
            same = same and a == b
            print(f"  {res}: {b} -> {a}{'' if a == b else '   <-- DIFFERENT'}")
    print("Throttles back to their prior values (the operator's own included): " + ("YES" if same else "NO"))
    print(f"\nSee this run in the Airflow UI: AIRFLOW_HOME={home} {Path(sys.executable).parent / 'airflow'} "
          "api-server --port 8080")
    print("  then open http://localhost:8080/dags/kafka_reassign: the run's grid, and in the execute task's log "
          "the progress table of every poll.")
    print("  The live progress page (http://localhost:8080/kafka-reassign/) needs the cluster, which stopped "
          "with the demo: see it in the compose stack (README).")
    print("=" * 78)
    return 0 if state == "success" and same else 1


if __name__ == "__main__":
    sys.exit(main())
