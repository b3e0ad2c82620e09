"""Benchmarks on a real Apache Kafka 4.3.1 cluster (kafka-local): ours against Kafka's own tool, and faults.

Starts its own 6-broker KRaft cluster (3 racks, 2 log dirs each) in a temporary directory and
prints two tables; nothing in them comes from the simulator.

1. *Ours vs Kafka's tool.* One fixed plan (one or two replicas of each of 12 partitions of
   20-60 MB, sizes fixed by a seed) run at a 2 MB/s throttle by ``kafka-reassign execute``
   and, on a fresh copy of the same topic, by Kafka's ``ReassignPartitionsCommand --execute
   --throttle`` with ``--verify`` polled until done. The moving phase is measured from the
   cluster's side (kafka-python's ListPartitionReassignments and metadata every 0.5 s: from
   the first reassignment seen in flight to none in flight with the placement at the target).
   The bound is the busiest broker's bytes in (as a new replica) or out (as the leader)
   divided by the throttle, from the plan and the partitions' sizes on disk. Throttle configs
   left are read back with confluent-kafka (``real_kafka_checks.throttle_configs``) and with
   Kafka's ``ConfigCommand --describe``; a per-broker rate set beforehand by "someone else"
   must come back.
2. *Faults on real Kafka.* One small topic per fault: kill -9 of a receiving broker mid-move
   then restart; another admin deletes our throttle mid-run; another tool's reassignment in
   flight; prior throttles per broker, as the cluster default and ``*`` on the topic.

Run: ``make bench`` or ``.venv/bin/python -m benchmarks.run real_kafka`` (6-11 minutes on a
shared 2-core machine, much of it JVMs starting). ``KAFKA_LOCAL_DIR`` reuses a running
``kafka-local up --brokers 6 --racks 3 --log-dirs 2`` cluster while developing.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
BROKERS, RACKS, LOG_DIRS = 6, 3, 2
THROTTLE = 2_000_000
SEED = 183  # of the seeds tried, one whose busiest broker moves least: the two runs fit the time budget
TOPIC = "bench-moves"
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_LIST, FOLLOWER_LIST = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
#: "Someone else's" per-broker rate, set before each run of table 1; it must come back.
PRIOR = ("broker", "6", LEADER_RATE, "70000000")
QUIET_LOG4J = "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = ERR\nappender.err.type = Console\n" \
              "appender.err.name = ERR\nappender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n" \
              "appender.err.layout.pattern = %p %m%n\n"
SETTING = tuple[str, str, str]


@dataclass
class Bench:
    """The running cluster, its bootstrap servers and a work directory for plans and records."""

    cluster: Any
    bootstrap: str
    work: Path

    @property
    def brokers(self) -> list[int]:
        return sorted(self.cluster.brokers)


# -- Kafka's own tools -----------------------------------------------------------------------

def java(bench: Bench, main: str, args: list[str], timeout: float = 300) -> tuple[int, str]:
    """Run one of Kafka's tools from kafka/lib (logging at WARN, to stderr); (exit code, stdout)."""
    log4j = bench.work / "tools-log4j2.properties"
    if not log4j.exists():
        log4j.write_text(QUIET_LOG4J)
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", str(ROOT / "kafka" / "lib" / "*"),
           f"-Dlog4j2.configurationFile={log4j}", main, "--bootstrap-server", bench.bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def config_command_throttles(bench: Bench, topics: list[str]) -> list[str]:
    """Throttle lines of ``ConfigCommand --describe`` for every broker, the default and ``topics``."""
    jobs = [["--describe", "--entity-type", "brokers"]]
    jobs += [["--describe", "--entity-type", "topics", "--entity-name", t] for t in topics]
    outs: list[str] = [""] * len(jobs)

    def one(i: int) -> None:
        outs[i] = java(bench, "kafka.admin.ConfigCommand", jobs[i])[1]

    # Each JVM takes ~20 s to start on a loaded machine: run them side by side.
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines, owner = [], ""
    for out in outs:
        for line in out.splitlines():
            if line.startswith(("Dynamic configs for", "Default configs for")):
                owner = line.split(" are:")[0].replace("Dynamic configs for ", "").replace("Default configs for ", "")
            elif "throttled" in line or "alter.log.dirs.io" in line:
                lines.append(f"{owner}: {line.strip().split(' sensitive=')[0]}")
    return lines


# -- reading and writing configs as "someone else" (confluent-kafka, not the tool's client) ----

def others_set(bench: Bench, values: dict[SETTING, str | None]) -> None:
    """Another admin (kafka-python, incremental) writes configs; None deletes.

    Broker "" is the cluster-wide default, which kafka-python cannot address: Kafka's ConfigCommand writes it.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for (rtype, name, key), value in values.items():
        if rtype == "broker" and name == "":
            op = ["--delete-config", key] if value is None else ["--add-config", f"{key}={value}"]
            rc, out = java(bench, "kafka.admin.ConfigCommand", ["--alter", "--entity-type", "brokers",
                                                                "--entity-default", *op])
            if rc:
                raise RuntimeError(f"ConfigCommand {' '.join(op)} failed: {out[-500:]}")
            continue
        grouped.setdefault((rtype, name), {})[key] = ("DELETE", None) if value is None else ("SET", value)
    resources = [ConfigResource(ConfigResourceType.BROKER if r == "broker" else ConfigResourceType.TOPIC, n, kv)
                 for (r, n), kv in grouped.items()]
    if not resources:
        return
    admin = KafkaAdminClient(bootstrap_servers=bench.bootstrap, client_id="someone-else")
    try:
        result = admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
    finally:
        admin.close()
    bad = [f"{t} {n}: {e}" for t, by in result.items() for n, e in by.items()
           if e is not None and getattr(e, "errno", 0) and str(e) != "NoError"]
    if bad:
        raise RuntimeError(f"someone else's config write failed: {bad}")


def throttles(bench: Bench, topics: list[str]) -> dict[str, str]:
    """Every throttle config somebody set, as ``"broker 6 key" -> "value (SOURCE)"`` (confluent-kafka)."""
    from real_kafka_checks import throttle_configs
    from real_kafka_checks import topics as existing
    live = set(existing(bench.bootstrap))
    found = throttle_configs(bench.bootstrap, bench.brokers, [t for t in topics if t in live])
    return {f"{res} {k}": f"{v} ({src})" for res, kv in found.items() for k, (v, src) in kv.items()}


def compare(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """(leftovers: keys set now that were not before, others' changed: keys set before now different)."""
    left = [f"{k}={v}" for k, v in sorted(after.items()) if k not in before]
    changed = [f"{k}: {v} -> {after.get(k, 'deleted')}" for k, v in sorted(before.items()) if after.get(k) != v]
    return left, changed


def clear_throttles(bench: Bench, topics: list[str]) -> None:
    """Delete every throttle config (between scenarios: each starts from a clean cluster)."""
    found = throttles(bench, topics)
    values: dict[SETTING, str | None] = {}
    for key, shown in found.items():
        rtype, name, k = key.split(" ")
        if "DYNAMIC_DEFAULT" in shown:
            values[("broker", "", k)] = None
        else:
            values[(rtype, name, k)] = None
    if values:
        others_set(bench, values)


# -- topics -------------------------------------------------------------------------------------

def fresh_topic(bench: Bench, name: str, assignment: dict[int, list[int]], sizes: dict[int, int],
                configs: dict[str, str] | None = None) -> None:
    """(Re)create ``name`` with this assignment and fill each partition with ``sizes[p]`` bytes."""
    from kafka_local.load import create_topic, fill
    delete_topic(bench, name)
    create_topic(bench.bootstrap, name, assignment, configs)
    fill(bench.bootstrap, name, sizes)


def delete_topic(bench: Bench, name: str, timeout: float = 60) -> None:
    """Delete ``name`` if it exists and wait until the metadata no longer lists it."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bench.bootstrap})
    if name not in admin.list_topics(timeout=30).topics:
        return
    admin.delete_topics([name])[name].result(timeout=30)
    deadline = time.monotonic() + timeout
    while name in admin.list_topics(timeout=30).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} still listed {timeout:.0f} s after its deletion")
        time.sleep(0.5)


def size_on_disk(bench: Bench, topic: str, partition: int, broker: int) -> int:
    """Bytes of ``topic-partition``'s log segments in ``broker``'s log dirs (read from the files)."""
    total = 0
    for d in bench.cluster.brokers[broker].log_dirs:
        pdir = Path(d) / f"{topic}-{partition}"
        if pdir.is_dir():
            total += sum(f.stat().st_size for f in pdir.glob("*.log"))
    return total


def throttle_bound(current: dict[int, list[int]], target: dict[int, list[int]], sizes: dict[int, int],
                   rate: float) -> tuple[float, str]:
    """Seconds the busiest broker needs at ``rate``: bytes in as a new replica or out as the leader."""
    traffic: dict[str, float] = {}
    for p, reps in target.items():
        added = [b for b in reps if b not in current[p]]
        leader = current[p][0]  # the preferred leader leads: the topic is new and nothing failed
        for b in added:
            traffic[f"{b} in"] = traffic.get(f"{b} in", 0.0) + sizes[p]
            traffic[f"{leader} out"] = traffic.get(f"{leader} out", 0.0) + sizes[p]
    busiest = max(traffic, key=lambda k: traffic[k])
    return traffic[busiest] / rate, f"broker {busiest} {traffic[busiest] / 1e6:.0f} MB"


# -- the cluster's side of a run ----------------------------------------------------------------

@dataclass
class Sample:
    """One look at the cluster: when, partitions of the topic in flight, placement at target, smallest ISR."""

    t: float
    in_flight: int
    at_target: bool
    min_isr: int


class Observer(threading.Thread):
    """Samples every ``interval`` s, with kafka-python, the topic's reassignments in flight and placement.

    Stops by itself once the moving phase ended (nothing in flight, placement at the target).
    """

    def __init__(self, bootstrap: str, topic: str, target: dict[int, list[int]], interval: float = 0.5,
                 timeout: float = 400) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.target = bootstrap, topic, target
        self.interval, self.timeout = interval, timeout
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self.exact_order = False
        self.stop_event = threading.Event()

    def look(self, admin: Any) -> Sample:
        """One sample: ListPartitionReassignments, then the topic's metadata."""
        flight = admin.list_partition_reassignments()
        n = sum(1 for tp in flight if tp.topic == self.topic)
        (md,) = admin.describe_topics([self.topic])
        placement = {p["partition_index"]: p["replica_nodes"] for p in md["partitions"]}
        # Kafka's order of replicas is the target's; sets compared so an order quirk cannot hang the phase.
        at = all(sorted(placement.get(p, [])) == sorted(r) for p, r in self.target.items())
        self.exact_order = placement == self.target
        return Sample(time.monotonic(), n, at, min(len(p["isr_nodes"]) for p in md["partitions"]))

    def run(self) -> None:
        from kafka import KafkaAdminClient

        def connect() -> Any:
            return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="bench-observer",
                                    request_timeout_ms=5000)
        admin = connect()
        deadline = time.monotonic() + self.timeout
        try:
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                t0 = time.monotonic()
                try:
                    self.samples.append(self.look(admin))
                except Exception as exc:  # noqa: BLE001 - a broker down mid-fault: reconnect, keep sampling
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    admin.close()
                    admin = connect()
                if self.phase() is not None:
                    return
                time.sleep(max(0.0, self.interval - (time.monotonic() - t0)))
        finally:
            admin.close()

    def timeline(self, every: float = 5.0) -> str:
        """Partitions in flight every ``every`` s of the moving phase (where the time went)."""
        phase = self.phase()
        if phase is None:
            return ""
        counts, next_t = [], phase[0]
        for s in self.samples:
            if phase[0] <= s.t <= phase[1] and s.t >= next_t:
                counts.append(str(s.in_flight))
                next_t += every
        return f"partitions in flight every {every:g} s: " + " ".join(counts)

    def started(self) -> bool:
        return any(s.in_flight for s in self.samples)

    def phase(self) -> tuple[float, float] | None:
        """(start, end) of the moving phase in monotonic seconds, or None while it has not ended."""
        starts = [k for k, s in enumerate(self.samples) if s.in_flight]
        if not starts:
            return None
        for s in self.samples[starts[0]:]:
            if not s.in_flight and s.at_target:
                return self.samples[starts[0]].t, s.t
        return None

    def wait_started(self, timeout: float, proc: subprocess.Popen | None = None) -> None:
        """Block until a reassignment of the topic was seen in flight (fail if ``proc`` exits first)."""
        deadline = time.monotonic() + timeout
        while not self.started():
            if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
                raise RuntimeError(f"no reassignment of {self.topic} seen in flight")
            time.sleep(0.1)


class ConfigSampler(threading.Thread):
    """Reads every throttle config every ``interval`` s during a run: did anything of others change meanwhile?"""

    def __init__(self, bench: Bench, topics: list[str], before: dict[str, str], interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.bench, self.topics, self.before, self.interval = bench, topics, before, interval
        self.changed: dict[str, set[str]] = {}
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                now = throttles(self.bench, self.topics)
            except Exception:  # noqa: BLE001 - a broker down mid-fault cannot be read
                continue
            for k, v in self.before.items():
                if now.get(k) != v:
                    self.changed.setdefault(k, set()).add(now.get(k, "deleted"))

    def finish(self) -> dict[str, set[str]]:
        """Stop sampling; key -> values other than the one before the run, as read during it."""
        self.stop_event.set()
        self.join(30)
        return self.changed


# -- the two tools --------------------------------------------------------------------------------

def ours_command(bench: Bench, plan: Path, throttle: str, *extra: str) -> list[str]:
    """``kafka-reassign execute`` as an operator types it (its records in the work directory)."""
    exe = Path(sys.executable).parent / "kafka-reassign"
    return [str(exe), "execute", "--bootstrap-server", bench.bootstrap, "--plan", str(plan), "--throttle", throttle,
            "--record-dir", str(bench.work / "records"), *extra]


def run_ours(bench: Bench, plan: Path) -> tuple[int, str, str]:
    """Our tool with the brief's command line; (exit code, output tail, notes)."""
    proc = subprocess.run(ours_command(bench, plan, "2MB/s"), capture_output=True, text=True, timeout=900)
    return proc.returncode, (proc.stdout + proc.stderr)[-3000:], ""


def run_kafka_tool(bench: Bench, plan: Path) -> tuple[int, str, str]:
    """Kafka's ReassignPartitionsCommand --execute --throttle, then --verify until every move completed.

    ``--verify`` also removes Kafka's throttle once every move is complete.
    """
    main = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    rc, out = java(bench, main, ["--reassignment-json-file", str(plan), "--execute", "--throttle", str(THROTTLE)])
    if rc:
        return rc, out[-3000:], "--execute failed"
    verifies, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 600:
        rc, vout = java(bench, main, ["--reassignment-json-file", str(plan), "--verify"])
        verifies += 1
        if rc or "in progress" not in vout:
            return rc, (out + vout)[-3000:], f"{verifies} --verify runs"
        time.sleep(2)
    return 1, vout[-3000:], f"still in progress after {verifies} --verify runs"


# -- table 1: ours vs Kafka's tool ----------------------------------------------------------------

def layout(n: int = 12) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, int]]:
    """(current, target, bytes to write) of the compared topic: leaders spread over the 6 brokers.

    Replicas ``[L, L+1, L+2]`` (consecutive ids sit in different racks); the plan swaps L+2 for its
    rack-mate L+5 and, on every fifth partition, L+1 for its rack-mate L+4 too (ids 3 apart share a rack).
    """
    rng = random.Random(SEED)
    current, target, sizes = {}, {}, {}
    for p in range(n):
        nxt = [(p + k) % BROKERS + 1 for k in range(BROKERS)]
        current[p] = [nxt[0], nxt[1], nxt[2]]
        target[p] = [nxt[0], nxt[4] if p % 5 == 0 else nxt[1], nxt[5]]
        sizes[p] = rng.randint(20, 60) * 1_000_000
    return current, target, sizes


def write_plan(path: Path, topic: str, target: dict[int, list[int]]) -> Path:
    """Kafka's reassignment JSON, which both tools read."""
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in sorted(target.items())]}, indent=1))
    return path


def rehearse(bench: Bench, plan: Path) -> str:
    """The simulator's prediction for the same plan on the same live topic (``kafka-reassign rehearse``)."""
    out = bench.work / "rehearsal.json"
    exe = Path(sys.executable).parent / "kafka-reassign"
    proc = subprocess.run([str(exe), "rehearse", "--bootstrap-server", bench.bootstrap, "--plan", str(plan),
                           "--throttle", "2MB/s", "--out", str(out)], capture_output=True, text=True, timeout=300)
    if proc.returncode or not out.exists():
        return f"rehearse failed (exit {proc.returncode}): {(proc.stdout + proc.stderr)[-300:]}"
    r = json.loads(out.read_text())
    return (f"simulator (kafka-reassign rehearse, same plan and topic) predicted {r['predicted_seconds']:.1f} s, "
            f"{r['ratio']:.2f}x its bound {r['bound_seconds']:.1f} s, {r['steps']} steps")


def prior_cell(after: dict[str, str]) -> str:
    """Whether the per-broker rate "someone else" set before the run is there again, as it was."""
    key = f"broker {PRIOR[1]} {PRIOR[2]}"
    now = after.get(key, "deleted")
    return f"yes ({PRIOR[3]})" if now.startswith(f"{PRIOR[3]} (DYNAMIC_BROKER") else f"no (now {now})"


@dataclass
class CompareRow:
    """One tool's run of the compared plan."""

    tool: str
    rc: int
    moving_s: float | None
    bound_s: float
    busiest: str
    left: list[str]
    config_command_left: list[str]
    prior: str
    wall_s: float
    notes: list[str] = field(default_factory=list)


def one_tool(bench: Bench, tool: str, plan: Path, layout_: tuple[dict, dict, dict]) -> CompareRow:
    """Fresh topic, a prior rate of someone else, one tool's run watched from the cluster, then read-backs."""
    current, target, sizes = layout_
    clear_throttles(bench, [TOPIC])
    fresh_topic(bench, TOPIC, current, sizes)
    others_set(bench, {PRIOR[:3]: PRIOR[3]})
    before = throttles(bench, [TOPIC])
    on_disk = {p: size_on_disk(bench, TOPIC, p, current[p][0]) for p in current}
    bound, busiest = throttle_bound(current, target, on_disk, THROTTLE)
    rehearsal = rehearse(bench, plan) if tool == "kafka-reassign" else ""
    observer = Observer(bench.bootstrap, TOPIC, target)
    observer.start()
    t0 = time.monotonic()
    rc, out, note = (run_ours if tool == "kafka-reassign" else run_kafka_tool)(bench, plan)
    wall = time.monotonic() - t0
    observer.join(120)
    observer.stop_event.set()
    after = throttles(bench, [TOPIC])
    cc = [line for line in config_command_throttles(bench, [TOPIC])
          if line != f"broker {PRIOR[1]}: {PRIOR[2]}={PRIOR[3]}"]
    left, _ = compare(before, after)
    phase = observer.phase()
    notes = [n for n in (note, rehearsal, f"exit code {rc}", f"tool wall {wall:.0f} s",
                         f"smallest ISR seen {min((s.min_isr for s in observer.samples), default='-')}",
                         observer.timeline(),
                         "final replica order = plan's" if observer.exact_order else "final replica order differs",
                         f"{len(observer.errors)} observer errors" if observer.errors else "") if n]
    if rc:
        notes.append("output: " + out.strip().replace("\n", " | ")[-600:])
    return CompareRow(tool, rc, phase[1] - phase[0] if phase else None, bound, busiest, left, cc,
                      prior_cell(after), wall, notes)


def compare_tools(bench: Bench) -> list[CompareRow]:
    """Table 1's two rows: the same plan file, the same topic recreated identically for each tool."""
    lay = layout()
    plan = write_plan(bench.work / "plan.json", TOPIC, lay[1])
    rows = []
    for tool in ("kafka-reassign", "Kafka's ReassignPartitionsCommand"):
        rows.append(one_tool(bench, tool, plan, lay))
        print(f"  ... {tool} done", flush=True)
    clear_throttles(bench, [TOPIC])
    delete_topic(bench, TOPIC)  # frees the disk before the faults
    return rows


def print_compare(rows: list[CompareRow]) -> None:
    """Table 1 with the columns of the brief, then one line of notes per tool."""
    head = ("tool", "moving phase s", "bound s", "ratio", "throttle configs left", "prior values restored")
    cells = []
    for r in rows:
        moving = f"{r.moving_s:.1f}" if r.moving_s is not None else "never ended"
        ratio = f"{r.moving_s / r.bound_s:.2f}" if r.moving_s is not None else "-"
        left = (f"{len(r.left)} (confluent-kafka), {len(r.config_command_left)} (ConfigCommand)")
        cells.append((r.tool, moving, f"{r.bound_s:.1f}", ratio, left, r.prior))
    print_table(head, cells)
    for r in rows:
        print(f"  {r.tool}: bound from {r.busiest}; " + "; ".join(r.notes))
        for line in r.left:
            print(f"      left (confluent-kafka): {line}")
        for line in r.config_command_left:
            print(f"      left (ConfigCommand): {line}")


def print_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Columns padded to their widest cell, separated by ``|``."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, tuple("-" * w for w in widths), *rows):
        print("  " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)), flush=True)


# -- table 2: faults on real Kafka ----------------------------------------------------------------

#: Each fault's topic: broker 1 leads both partitions and sends 12 MB to broker 6 at 1 MB/s (~12 s).
FAULT_CURRENT = {0: [1, 2, 3], 1: [1, 3, 5]}
FAULT_TARGET = {0: [1, 2, 6], 1: [1, 3, 6]}
FAULT_SIZES = {0: 6_000_000, 1: 6_000_000}
#: Faster polls than the default 10 s so that each row ends soon after its moves.
FAULT_ARGS = ("--poll-interval-seconds", "2")
FAULT_RATE = 1_000_000


@dataclass
class FaultRun:
    """One fault row while it runs: our CLI, the configs found before it, a sampler of them during it."""

    bench: Bench
    topic: str
    before: dict[str, str]
    sampler: ConfigSampler
    observer: Observer
    proc: subprocess.Popen
    log: Path
    notes: list[str] = field(default_factory=list)


@dataclass
class FaultRow:
    fault: str
    outcome: str
    left: list[str]
    touched: str
    restored: str
    notes: list[str]


def prepare_fault(bench: Bench, topic: str, priors: dict[SETTING, str]) -> None:
    """A clean cluster, the fault's small topic, and the throttles "someone else" set before the run."""
    clear_throttles(bench, [topic])
    fresh_topic(bench, topic, FAULT_CURRENT, FAULT_SIZES)
    if priors:
        others_set(bench, priors)
        wait_visible(bench, [topic], priors)


def wait_visible(bench: Bench, topics: list[str], values: dict[SETTING, str], timeout: float = 30) -> None:
    """Wait until every broker shows ``values``: a config write reaches the brokers through the metadata log."""
    deadline = time.monotonic() + timeout
    while True:
        now = throttles(bench, topics)
        missing = [(r, n, k) for (r, n, k), v in values.items()
                   if not all(now.get(f"{r} {x} {k}", "").startswith(f"{v} ")
                              for x in ([str(b) for b in bench.brokers] if n == "" else [n]))]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"configs written but not visible after {timeout:.0f} s: {missing}")
        time.sleep(0.3)


def launch(bench: Bench, topic: str, plan_target: dict[int, list[int]]) -> FaultRun:
    """Start ``kafka-reassign execute`` on a plan for ``topic`` at 1 MB/s, watched from the cluster."""
    before = throttles(bench, [topic])
    plan = write_plan(bench.work / f"plan-{topic}.json", topic, plan_target)
    sampler = ConfigSampler(bench, [topic], before)
    observer = Observer(bench.bootstrap, topic, plan_target, timeout=300)
    sampler.start()
    observer.start()
    log = bench.work / f"{topic}.out"
    with log.open("w") as out:
        proc = subprocess.Popen(ours_command(bench, plan, str(FAULT_RATE), *FAULT_ARGS), stdout=out,
                                stderr=subprocess.STDOUT, text=True)
    return FaultRun(bench, topic, before, sampler, observer, proc, log)


def settle(run: FaultRun, fault: str, theirs_touched: str = "") -> FaultRow:
    """Wait for our run to exit, then compare every throttle config with what was there before."""
    try:
        rc = run.proc.wait(600)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        rc = run.proc.wait()
        run.notes.append("killed after 600 s")
    during = run.sampler.finish()
    run.observer.stop_event.set()
    after = throttles(run.bench, [run.topic])
    left, changed = compare(run.before, after)
    output = run.log.read_text(errors="replace").splitlines()
    last = next((line for line in reversed(output) if line.strip()), "")
    outcome = f"{'success' if rc == 0 else 'failed'} (exit {rc})"
    touched = "; ".join(filter(None, [theirs_touched, *(f"{c} at the end" for c in changed)])) or "no"
    if during and touched == "no":
        values = sorted({v.split(" ")[0] for vs in during.values() for v in vs})
        why = "ours, lower than theirs" if values == [str(FAULT_RATE)] else "see notes"
        touched = f"no (during the run {len(during)} of their values read {'/'.join(values)}: {why})"
        run.notes += [f"during the run: {k} -> {'/'.join(sorted(v))}" for k, v in sorted(during.items())]
    restored = "yes" if not changed else "no: " + ", ".join(changed)
    notes = [*run.notes, f"last output line: {last[:200]}"]
    # The tool's logged warnings (the guard's re-applies, the restore's decisions), each once.
    warnings = list(dict.fromkeys(line.split(" WARNING ", 1)[1] for line in output if " WARNING " in line))
    notes += [f"tool warned: {w[:260]}" for w in warnings[:6]]
    return FaultRow(fault, outcome, left, touched, restored, notes)


def fault_kill_broker(bench: Bench) -> FaultRow:
    """kill -9 of the receiving broker 6 two seconds into the move, then restart it at once."""
    topic = "fault-kill"
    prepare_fault(bench, topic, {("broker", "1", LEADER_RATE): "70000000"})
    run = launch(bench, topic, FAULT_TARGET)
    run.observer.wait_started(120, run.proc)
    time.sleep(2)
    bench.cluster.kill_broker(6)
    t0 = time.monotonic()
    time.sleep(1)
    bench.cluster.start_broker(6, timeout=240)
    answered = wait_answers(bench, 6)
    run.notes.append(f"broker 6 killed; start_broker returned {time.monotonic() - t0 - answered:.0f} s later, "
                     f"broker 6 answered DescribeConfigs {time.monotonic() - t0:.0f} s after the kill")
    row = settle(run, "kill -9 of receiving broker 6 mid-move, restart")
    phase = run.observer.phase()
    row.notes.append((f"moving phase {phase[1] - phase[0]:.0f} s" if phase else "moving phase not seen to end")
                     + f" ({len(run.observer.samples)} samples, {len(run.observer.errors)} failed while broker 6 "
                     f"was down)")
    return row


def wait_answers(bench: Bench, broker: int, timeout: float = 240) -> float:
    """Seconds until ``broker`` itself answers DescribeConfigs (the controller may list it before it runs)."""
    from real_kafka_checks import describe
    t0 = time.monotonic()
    while True:
        try:
            describe(f"127.0.0.1:{bench.cluster.brokers[broker].port}", "broker", str(broker))
            return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() - t0 > timeout:
                raise
            time.sleep(0.5)


def fault_throttle_deleted(bench: Bench) -> FaultRow:
    """Another admin deletes our rates on the sender (1) and the receiver (6) two seconds into the move."""
    topic = "fault-deleted"
    prepare_fault(bench, topic, {("broker", "4", LEADER_RATE): "70000000"})
    run = launch(bench, topic, FAULT_TARGET)
    run.observer.wait_started(120, run.proc)
    time.sleep(2)
    others_set(bench, {("broker", "1", LEADER_RATE): None, ("broker", "6", FOLLOWER_RATE): None})
    t0 = time.monotonic()
    back = None
    while run.proc.poll() is None and time.monotonic() - t0 < 60:
        now = throttles(bench, [topic])
        if f"broker 1 {LEADER_RATE}" in now and f"broker 6 {FOLLOWER_RATE}" in now:
            back = time.monotonic() - t0
            break
        time.sleep(0.5)
    run.notes.append(f"our deleted rates back {back:.1f} s after the deletion" if back is not None
                     else "our deleted rates were not seen again before the run ended")
    return settle(run, "another admin deletes our throttle mid-run")


def in_flight(bench: Bench, topic: str) -> dict[int, tuple[list[int], list[int]]]:
    """Partition -> (replicas, adding) of ``topic``'s reassignments in flight (kafka-python)."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bench.bootstrap, client_id="bench-reader")
    try:
        flight = admin.list_partition_reassignments()
    finally:
        admin.close()
    return {tp.partition: (list(v["replicas"]), list(v["adding_replicas"])) for tp, v in flight.items()
            if tp.topic == topic}


def fault_foreign_in_flight(bench: Bench) -> FaultRow:
    """Kafka's own tool moves partition 0 at 200 kB/s; we are asked to move partition 1 meanwhile."""
    topic = "fault-foreign"
    prepare_fault(bench, topic, {})
    theirs = write_plan(bench.work / "plan-theirs.json", topic, {0: FAULT_TARGET[0]})
    rc, out = java(bench, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                   ["--reassignment-json-file", str(theirs), "--execute", "--throttle", "200000"])
    if rc:
        raise RuntimeError(f"Kafka's tool could not start its move: {out[-800:]}")
    theirs_before = in_flight(bench, topic)
    run = launch(bench, topic, {1: FAULT_TARGET[1]})
    run.proc.wait(300)
    theirs_after = in_flight(bench, topic)
    touched = "no (their move still in flight, unchanged)" if theirs_after == theirs_before else \
        f"their move: {theirs_before} -> {theirs_after}"
    run.notes.append(f"their move before/after our run: {theirs_before} / {theirs_after}")
    row = settle(run, "another tool's reassignment in flight", touched)
    cancel_theirs(bench, topic)
    return row


def cancel_theirs(bench: Bench, topic: str) -> None:
    """Clean up after the foreign row: cancel their move (their throttle goes in the next clear)."""
    from kafka import KafkaAdminClient, TopicPartition
    admin = KafkaAdminClient(bootstrap_servers=bench.bootstrap, client_id="someone-else")
    try:
        admin.alter_partition_reassignments({TopicPartition(topic, p): None for p in in_flight(bench, topic)})
    finally:
        admin.close()
    clear_throttles(bench, [topic])


def fault_priors(bench: Bench) -> FaultRow:
    """Throttles set before the run: a per-broker rate, a cluster-wide default rate and ``*`` on the topic."""
    topic = "fault-priors"
    prepare_fault(bench, topic, {("broker", "1", LEADER_RATE): "70000000", ("broker", "", FOLLOWER_RATE): "80000000",
                                 ("topic", topic, LEADER_LIST): "*"})
    run = launch(bench, topic, FAULT_TARGET)
    row = settle(run, "prior throttles: per-broker, cluster default, * on topic")
    clear_throttles(bench, [topic])  # the cluster default would throttle the next scenarios
    return row


FAULTS: list[Callable[[Bench], FaultRow]] = [fault_kill_broker, fault_throttle_deleted, fault_foreign_in_flight,
                                             fault_priors]


def run_faults(bench: Bench) -> list[FaultRow]:
    """Every fault row in turn; a crashed row is reported as such and the next one still runs."""
    rows = []
    for fn in FAULTS:
        try:
            rows.append(fn(bench))
        except Exception as exc:  # noqa: BLE001 - a crashed row is reported, the others still run
            traceback.print_exc()
            rows.append(FaultRow(fn.__name__, f"CRASHED: {type(exc).__name__}: {exc}"[:300], [], "?", "?", []))
        print(f"  ... {rows[-1].fault} done", flush=True)
        for r in bench.cluster.status():
            if r["role"] == "broker" and not r["running"]:
                bench.cluster.start_broker(r["node"])  # the next row needs every broker
    return rows


def print_faults(rows: list[FaultRow]) -> None:
    """Table 2, then each row's notes."""
    head = ("fault", "run outcome (exit code)", "throttle configs left", "others' config/reassignment touched",
            "prior values restored")
    print_table(head, [(r.fault, r.outcome, str(len(r.left)) if not r.left else "; ".join(r.left), r.touched,
                        r.restored) for r in rows])
    for r in rows:
        for n in r.notes:
            print(f"  {r.fault}: {n}")


# -- main ------------------------------------------------------------------------------------------

def start_cluster(work: Path) -> tuple[Any, bool]:
    """(cluster, owned): our own 6-broker cluster, or the one ``KAFKA_LOCAL_DIR`` names (kept running)."""
    from kafka_local import LocalKafka
    if os.environ.get("KAFKA_LOCAL_DIR"):
        return LocalKafka.load(os.environ["KAFKA_LOCAL_DIR"]), False
    cluster = LocalKafka(work / "cluster", BROKERS, RACKS, LOG_DIRS, owner_pid=os.getpid())
    cluster.up(timeout=300)
    return cluster, True


def main(argv: list[str] | None = None) -> int:
    """Start a real cluster, print both tables, stop it."""
    sys.path.insert(0, str(ROOT / "tests" / "real_kafka"))  # real_kafka_checks: the independent read-backs
    import logging
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    # `python -m benchmarks.real_kafka compare|faults` runs one table; benchmarks.run's own argv is ignored.
    only = {a for a in (argv if argv is not None else sys.argv[1:]) if a in ("compare", "faults")}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-real-kafka-") as tmp:
        cluster, owned = start_cluster(Path(tmp))
        try:
            bench = Bench(cluster, cluster.bootstrap_servers, Path(tmp))
            print(f"real Apache Kafka 4.3.1, {len(cluster.brokers)} brokers, {RACKS} racks, {LOG_DIRS} log dirs "
                  f"(kafka-local, up in {time.monotonic() - t0:.0f} s)", flush=True)
            if not only or "compare" in only:
                print(f"Ours vs Kafka's tool: one plan, 12 partitions of 20-60 MB (seed {SEED}), RF 3, "
                      f"throttle {THROTTLE / 1e6:g} MB/s; moving phase from the cluster's side (0.5 s samples):",
                      flush=True)
                print_compare(compare_tools(bench))
            if not only or "faults" in only:
                print("Faults on real Kafka (one small topic each, 1 MB/s, --poll-interval-seconds 2):", flush=True)
                print_faults(run_faults(bench))
        finally:
            if owned:
                cluster.down()
    print(f"reproduce: .venv/bin/python -m benchmarks.run real_kafka  (or make bench); "
          f"took {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
