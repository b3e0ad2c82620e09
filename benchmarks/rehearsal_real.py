"""Rehearsal against real Kafka (issue 19): four plans predicted from a snapshot, then run for real.

Each case creates and fills its topics on a real Apache Kafka 4.3.1 cluster (6 brokers, 3
racks, 2 log dirs), starts its producers (acks=all, rate-limited) and lets them run one quota
window, takes the snapshot with ``kafka-reassign snapshot --sample-seconds`` and makes a plan
none of the simulator's calibration used:

* demo: the demo scenario's four topics, sizes scaled down, the demo's greedy plan;
* decommission: ``kafka-reassign plan --goal remove-brokers --brokers 6 --engine local``;
* skewed rebalance: every replica on brokers 1-3, ``--goal rebalance --engine local``;
* hot partitions: the two partitions the snapshot found most written, moved with their
  producers running.

It rehearses the plan offline (``kafka-reassign rehearse --snapshot``) while it runs it for real
(``kafka-reassign execute``), both with the same run flags, and takes the real moving time
from the cluster's side (:class:`benchmarks.real_kafka_watch.Observer`: first reassignment
seen in flight to none in flight with the placement at the target).

Prints ``case | predicted s | actual s | predicted/actual`` and writes the same table into
docs/REHEARSAL.md between ``<!-- rehearsal-real:begin -->`` and ``<!-- rehearsal-real:end -->``.

Run: ``.venv/bin/python -m benchmarks.rehearsal_real [--only NAME ...] [--no-docs]``
(``KAFKA_LOCAL_DIR`` reuses a running ``kafka-local`` cluster of 6 brokers, 3 racks, 2 dirs).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from benchmarks.calibration import WARMUP_S, Producer, write_docs
from benchmarks.real_kafka_cluster import Bench, clear_throttles, delete_topic, fresh_topic, print_table, start_cluster
from benchmarks.real_kafka_watch import Observer, Sample
from kafka_reassign.cluster.admin import KafkaAdmin

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "REHEARSAL.md"
BEGIN, END = "<!-- rehearsal-real:begin -->", "<!-- rehearsal-real:end -->"
MB = 1_000_000
THROTTLE = "2MB/s"
#: the run flags both the rehearsal and the real run get (a 2 s poll keeps step boundaries close)
RUN_FLAGS = ("--throttle", THROTTLE, "--poll-interval-seconds", "2")
#: produce rates are read from log growth over this window (snapshot --sample-seconds)
SAMPLE_S = 6.0
#: demo scenario sizes are divided by this (its largest partition becomes ~19 MB)
DEMO_SCALE = 30
TOLERANCE = 0.10
EXE = Path(sys.executable).parent / "kafka-reassign"

Assignment = dict[int, list[int]]
PlanMaker = Callable[["Case", Path, Path], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """One plan: its topics (placement and bytes to write), its producers and how its plan is made."""

    name: str
    topics: Mapping[str, Assignment]
    sizes: Mapping[str, Mapping[int, int]]
    make_plan: PlanMaker
    producers: Mapping[tuple[str, int], float] = field(default_factory=dict)  # (topic, partition) -> bytes/s


@dataclass
class Result:
    """Predicted and actual moving time of one case, and what the plan moved."""

    case: Case
    predicted: float | None
    actual: float | None
    moves: int
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.predicted is None or not self.actual:
            return None
        return self.predicted / self.actual


# ------------------------------------------------------------------ the operator's commands
def cli(*args: str, timeout: float = 600) -> str:
    """Run ``kafka-reassign ARGS``; its output, or RuntimeError with the tail when it failed."""
    proc = subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"kafka-reassign {args[0]} exit {proc.returncode}: {(proc.stdout + proc.stderr)[-1500:]}")
    return proc.stdout


def take_snapshot(bench: Bench, out: Path) -> dict[str, Any]:
    """``kafka-reassign snapshot --sample-seconds``: the project's own reader, produce rates included."""
    cli("snapshot", "--bootstrap-server", bench.bootstrap, "--sample-seconds", str(SAMPLE_S), "--out", str(out))
    snap: dict[str, Any] = json.loads(out.read_text())
    return snap


def planner(goal: str, *flags: str) -> PlanMaker:
    """A plan maker running ``kafka-reassign plan --goal GOAL --engine local`` on the case's topics.

    The planner gets the snapshot of the case's topics only: others' topics on a shared cluster
    (on the broker to drain, say) are neither moved nor a conflict; the rehearsal gets it whole.
    """
    def make(case: Case, snapshot: Path, work: Path) -> dict[str, Any]:
        scoped, out = work / "snapshot-case.json", work / f"plan-{goal}.json"
        scoped.write_text(json.dumps(own_topics(snapshot, case)))
        cli("plan", "--snapshot", str(scoped), "--goal", goal, *flags, "--engine", "local",
            "--throttle", THROTTLE, "--no-chart", "--out", str(out))
        plan: dict[str, Any] = json.loads(out.read_text())
        return plan
    return make


def own_topics(snapshot: Path, case: Case) -> dict[str, Any]:
    """The snapshot with only the case's topics (the plan makers that work on a parsed snapshot)."""
    snap: dict[str, Any] = json.loads(snapshot.read_text())
    snap["topics"] = [t for t in snap["topics"] if t["name"] in case.topics]
    return snap


def demo_plan(case: Case, snapshot: Path, work: Path) -> dict[str, Any]:
    """The demo's own greedy plan (fullest broker to emptiest rack-safe one) on the case's topics."""
    from kafka_reassign_demo.scenario import demo_plan as greedy
    return greedy(own_topics(snapshot, case), moves=4)


def rack_mate(broker: int) -> int:
    """The broker in the same rack (kafka-local: ids 3 apart share a rack)."""
    return broker + 3 if broker <= 3 else broker - 3


def hottest_plan(case: Case, snapshot: Path, work: Path, n: int = 2) -> dict[str, Any]:
    """Move the ``n`` partitions the snapshot saw most written: each last replica to its rack-mate."""
    parts = [(t["name"], p) for t in own_topics(snapshot, case)["topics"] for p in t["partitions"]]
    hot = sorted(parts, key=lambda tp: -float(tp[1].get("bytes_in_per_sec") or 0))[:n]
    entries = []
    for topic, p in hot:
        replicas = list(p["replicas"])
        replicas[-1] = rack_mate(replicas[-1])
        entries.append({"topic": topic, "partition": p["partition"], "replicas": replicas})
    return {"version": 1, "partitions": entries}


# ------------------------------------------------------------------ the four cases
def rotation(partitions: int, brokers: Sequence[int], rf: int = 3) -> Assignment:
    """Partition p on ``rf`` consecutive brokers of ``brokers`` starting at the p-th (racks differ)."""
    return {p: [brokers[(p + k) % len(brokers)] for k in range(rf)] for p in range(partitions)}


def demo_case() -> Case:
    """The demo scenario's topics and placement, sizes divided by DEMO_SCALE, the demo's plan."""
    from kafka_reassign_demo.scenario import load_scenario
    scenario = load_scenario()
    topics = {t["name"]: {p["partition"]: list(p["replicas"]) for p in t["partitions"]} for t in scenario["topics"]}
    sizes = {t["name"]: {p["partition"]: max(MB, int(p["size_bytes"]) // DEMO_SCALE) for p in t["partitions"]}
             for t in scenario["topics"]}
    return Case("demo plan (4 topics, scaled 1/30)", topics, sizes, demo_plan)


def decommission_case(topic: str = "decom", size: int = 15 * MB) -> Case:
    """Six partitions spread over the six brokers (three on broker 6), the planner drains broker 6."""
    spread = rotation(6, range(1, 7))
    return Case(f"decommission broker 6 (6 x {size // MB} MB)", {topic: spread}, {topic: dict.fromkeys(spread, size)},
                planner("remove-brokers", "--brokers", "6"))


def cases() -> list[Case]:
    """Demo plan, decommission of broker 6, skewed rebalance, hottest partitions under producers."""
    spread = rotation(6, range(1, 7))
    skewed = rotation(6, (1, 2, 3))
    hot_rate = 250_000.0
    return [
        demo_case(),
        decommission_case(),
        Case("skewed rebalance (6 x 12 MB on 1-3)", {"skew": skewed}, {"skew": dict.fromkeys(skewed, 12 * MB)},
             planner("rebalance")),
        Case("2 most-written partitions, producers 250 kB/s", {"hot": spread}, {"hot": dict.fromkeys(spread, 10 * MB)},
             hottest_plan, {("hot", 0): hot_rate, ("hot", 2): hot_rate}),
    ]


# ------------------------------------------------------------------ one case
@contextlib.contextmanager
def producing(bench: Bench, rates: Mapping[tuple[str, int], float]) -> Iterator[list[Producer]]:
    """The case's producers, warmed up one quota window before the snapshot; stopped afterwards."""
    running = [Producer(bench.bootstrap, topic, partition, rate) for (topic, partition), rate in rates.items()]
    for prod in running:
        prod.start()
    try:
        if running:
            time.sleep(WARMUP_S)
        yield running
    finally:
        for prod in running:
            prod.stop()


def targets(plan: Mapping[str, Any]) -> dict[str, Assignment]:
    """topic -> partition -> target replicas of a plan."""
    out: dict[str, Assignment] = {}
    for e in plan["partitions"]:
        out.setdefault(e["topic"], {})[int(e["partition"])] = list(e["replicas"])
    return out


def predicted(work: Path, snapshot: Path, plan: Path) -> float | None:
    """``kafka-reassign rehearse --snapshot`` with the run flags: its predicted moving time."""
    out = work / "rehearsal.json"
    cli("rehearse", "--snapshot", str(snapshot), "--plan", str(plan), *RUN_FLAGS, "--out", str(out))
    value = json.loads(out.read_text()).get("predicted_seconds")
    return float(value) if value is not None else None


def wanted_dirs(plan: Mapping[str, Any]) -> dict[str, dict[tuple[int, int], str]]:
    """topic -> (partition, broker) -> the log dir the plan names (``any`` and absent ones left out)."""
    out: dict[str, dict[tuple[int, int], str]] = {}
    for e in plan["partitions"]:
        for broker, path in zip(e["replicas"], e.get("log_dirs") or ()):
            if path != "any":
                out.setdefault(e["topic"], {})[(int(e["partition"]), int(broker))] = path
    return out


class DirObserver(Observer):
    """The moving phase including the plan's log-dir moves (KIP-113), which the rehearsal counts too.

    A partition whose reassignment completed may still have replicas copied between the log dirs
    of their broker (a broker creates a new replica in a dir of its choosing; the run's last step
    moves it where the plan says): the phase ends only once no replica of the topic has a future
    log and every planned replica sits in its planned dir (DescribeLogDirs, read only then).
    """

    def __init__(self, bootstrap: str, topic: str, target: Assignment, dirs: Mapping[tuple[int, int], str]) -> None:
        super().__init__(bootstrap, topic, target, interval=0.25, timeout=300)
        self.dirs = dict(dirs)
        self.port: KafkaAdmin | None = None

    def look(self, admin: KafkaAdminClient) -> Sample:
        sample = super().look(admin)
        if sample.in_flight or not sample.at_target or not self.dirs:
            return sample
        if self.port is None:
            self.port = KafkaAdmin(bootstrap_servers=self.bootstrap, client_id="bench-dir-observer")
        rows = [r for r in self.port.describe_log_dirs() if r.topic == self.topic]
        placed = {(r.partition, r.broker): r.path for r in rows if not r.is_future}
        settled = not any(r.is_future for r in rows) and all(placed.get(k) == d for k, d in self.dirs.items())
        return sample if settled else replace(sample, at_target=False)

    def run(self) -> None:
        try:
            super().run()
        finally:
            if self.port is not None:
                self.port.close()


def actual(bench: Bench, plan: Path, wanted: Mapping[str, Assignment],
           dirs: Mapping[str, Mapping[tuple[int, int], str]]) -> tuple[float | None, list[str]]:
    """``kafka-reassign execute`` watched from the cluster: (moving seconds or None, notes)."""
    observers = [DirObserver(bench.bootstrap, topic, target, dirs.get(topic, {})) for topic, target in wanted.items()]
    for obs in observers:
        obs.start()
    proc = subprocess.run([str(EXE), "execute", "--bootstrap-server", bench.bootstrap, "--plan", str(plan), *RUN_FLAGS,
                           "--record-dir", str(bench.work / "records")], capture_output=True, text=True, timeout=600)
    for obs in observers:
        obs.join(60)
        obs.stop_event.set()
    phases = [obs.phase() for obs in observers]
    notes = [f"execute exit {proc.returncode}"] + [obs.timeline() for obs in observers if obs.phase()]
    if proc.returncode:
        notes.append((proc.stdout + proc.stderr).strip().replace("\n", " | ")[-600:])
    if not phases or any(ph is None for ph in phases):
        return None, notes + ["a topic's moving phase was not seen to end"]
    starts = [ph[0] for ph in phases if ph]
    ends = [ph[1] for ph in phases if ph]
    return max(ends) - min(starts), notes


def run_case(bench: Bench, case: Case) -> Result:
    """Create and fill, produce, snapshot, plan, rehearse, execute; topics deleted afterwards."""
    work = Path(tempfile.mkdtemp(prefix="case-", dir=bench.work))
    for topic, assignment in case.topics.items():
        fresh_topic(bench, topic, assignment, dict(case.sizes[topic]))
    try:
        with producing(bench, case.producers) as running:
            snapshot = work / "snapshot.json"
            take_snapshot(bench, snapshot)
            plan = case.make_plan(case, snapshot, work)
            plan_file = work / "plan.json"
            plan_file.write_text(json.dumps(plan, indent=1))
            # The rehearsal runs beside the real run, not before it: with producers writing, every
            # second between the snapshot and the real start grows the logs to copy beyond what the
            # snapshot (the rehearsal's t=0) holds.
            with ThreadPoolExecutor(1) as pool:
                rehearsal = pool.submit(predicted, work, snapshot, plan_file)
                seconds, notes = actual(bench, plan_file, targets(plan), wanted_dirs(plan))
                guess = rehearsal.result()
            notes += [f"producer errors: {len(p.errors)}" for p in running if p.errors]
        return Result(case, guess, seconds, len(plan["partitions"]), notes)
    finally:
        clear_throttles(bench, list(case.topics))
        for topic in case.topics:
            delete_topic(bench, topic)


# ------------------------------------------------------------------ table and docs
def _cell(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}"


def rows(results: Sequence[Result]) -> list[tuple[str, ...]]:
    """case | moves | predicted s | actual s | predicted/actual."""
    return [(r.case.name, str(r.moves), _cell(r.predicted), _cell(r.actual),
             "-" if r.ratio is None else f"{r.ratio:.2f}") for r in results]


def markdown(results: Sequence[Result]) -> str:
    """The docs table, labelled with what was compared."""
    head = ("case", "moves", "predicted s (rehearsal)", "actual s (real Kafka 4.3.1)", "predicted/actual")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(results)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the four cases on one real cluster, print the table and write it into docs/REHEARSAL.md."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="case name prefixes to run")
    ap.add_argument("--no-docs", action="store_true", help="print only, leave docs/REHEARSAL.md alone")
    args = ap.parse_args(argv or [])
    chosen = [c for c in cases() if not args.only or any(c.name.startswith(o) for o in args.only)]
    sys.path.insert(0, str(ROOT / "tests" / "real_kafka"))  # real_kafka_checks: the independent read-backs
    with tempfile.TemporaryDirectory(prefix="rehearsal-real-") as tmp:
        cluster, owned = start_cluster(Path(tmp))
        bench = Bench(cluster, cluster.bootstrap_servers, Path(tmp))
        results = []
        try:
            for case in chosen:
                print(f"  ... {case.name}", flush=True)
                results.append(run_case(bench, case))
                print("      " + "; ".join(results[-1].notes), flush=True)
        finally:
            if owned:
                cluster.down()
    print_table(("case", "moves", "predicted s", "actual s", "predicted/actual"), rows(results))
    if not args.no_docs and not args.only:
        write_docs(markdown(results), DOCS, BEGIN, END)
    off = [r.case.name for r in results if r.ratio is None or abs(r.ratio - 1) > TOLERANCE]
    if off:
        print(f"  outside +-{TOLERANCE:.0%}: " + ", ".join(off), flush=True)
    return 1 if off else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
