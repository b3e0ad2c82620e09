"""Table 2 of the real-Kafka benchmark: faults during a run of kafka-reassign on real Kafka.

One small topic per fault: kill -9 of a receiving broker mid-move then restart; another admin
deletes our throttle mid-run; another tool's reassignment in flight; prior throttles per
broker, as the cluster default and ``*`` on the topic.
"""
from __future__ import annotations

import subprocess
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from benchmarks.real_kafka_cluster import (
    FOLLOWER_RATE, LEADER_LIST, LEADER_RATE, SETTING, Bench, clear_throttles, compare, fresh_topic, java,
    ours_command, others_set, print_table, throttles, write_plan,
)
from benchmarks.real_kafka_watch import ConfigSampler, Observer

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


def launch_moving(bench: Bench, topic: str, priors: dict[SETTING, str]) -> FaultRun:
    """A fault's topic and priors, our run on :data:`FAULT_TARGET`, returned two seconds into its move."""
    prepare_fault(bench, topic, priors)
    run = launch(bench, topic, FAULT_TARGET)
    run.observer.wait_started(120, run.proc)
    time.sleep(2)
    return run


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
    run = launch_moving(bench, "fault-kill", {("broker", "1", LEADER_RATE): "70000000"})
    bench.cluster.kill_broker(6)
    t0 = time.monotonic()
    time.sleep(1)
    # start_broker returns once broker 6 itself and every other broker list it unfenced
    bench.cluster.start_broker(6, timeout=240)
    run.notes.append(f"broker 6 killed; answering and unfenced again {time.monotonic() - t0:.0f} s after the kill")
    row = settle(run, "kill -9 of receiving broker 6 mid-move, restart")
    phase = run.observer.phase()
    row.notes.append((f"moving phase {phase[1] - phase[0]:.0f} s" if phase else "moving phase not seen to end")
                     + f" ({len(run.observer.samples)} samples, {len(run.observer.errors)} failed while broker 6 "
                     f"was down)")
    return row


def fault_throttle_deleted(bench: Bench) -> FaultRow:
    """Another admin deletes our rates on the sender (1) and the receiver (6) two seconds into the move."""
    topic = "fault-deleted"
    run = launch_moving(bench, topic, {("broker", "4", LEADER_RATE): "70000000"})
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
