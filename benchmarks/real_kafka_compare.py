"""Table 1 of the real-Kafka benchmark: kafka-reassign against Kafka's ReassignPartitionsCommand.

One fixed plan run by each tool on a fresh copy of the same topic at the same throttle; the
moving phase is measured from the cluster's side and compared with the busiest broker's bound.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.real_kafka_cluster import (
    BROKERS, LEADER_RATE, Bench, clear_throttles, compare, config_command_throttles, delete_topic, fresh_topic,
    java, ours_command, others_set, print_table, size_on_disk, throttles, write_plan,
)
from benchmarks.real_kafka_watch import Observer
from kafka_reassign.planning.bounds import UniformLimits, partition_copy, source_free_bound
from kafka_reassign.planning.bounds import throttle_bound as fixed_leader_bound

THROTTLE = 2_000_000
SEED = 183  # of the seeds tried, one whose busiest broker moves least: the two runs fit the time budget
TOPIC = "bench-moves"
#: "Someone else's" per-broker rate, set before each run of table 1; it must come back.
PRIOR = ("broker", "6", LEADER_RATE, "70000000")


def throttle_bound(current: dict[int, list[int]], target: dict[int, list[int]], sizes: dict[int, int],
                   rate: float) -> tuple[float, str, float]:
    """(fixed-leader bound s, what sets it, source-free bound s) at ``rate``: the busiest broker's bytes in
    as a new replica or out as the leader; source-free, any current replica may send (all in sync)."""
    # The preferred leader leads: the topic is new and nothing failed.
    copies = [partition_copy(current[p], reps, sizes[p], current[p][0]) for p, reps in target.items()]
    limits = UniformLimits(rate)
    fixed = fixed_leader_bound(copies, limits)
    return (fixed.seconds, f"broker {fixed.broker} {fixed.side} {fixed.seconds * rate / 1e6:.0f} MB",
            source_free_bound(copies, limits).seconds)


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
    source_free_s: float = 0.0


def one_tool(bench: Bench, tool: str, plan: Path, layout_: tuple[dict, dict, dict]) -> CompareRow:
    """Fresh topic, a prior rate of someone else, one tool's run watched from the cluster, then read-backs."""
    current, target, sizes = layout_
    clear_throttles(bench, [TOPIC])
    fresh_topic(bench, TOPIC, current, sizes)
    others_set(bench, {PRIOR[:3]: PRIOR[3]})
    before = throttles(bench, [TOPIC])
    on_disk = {p: size_on_disk(bench, TOPIC, p, current[p][0]) for p in current}
    bound, busiest, free = throttle_bound(current, target, on_disk, THROTTLE)
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
                      prior_cell(after), wall, notes, free)


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
        free = (f"source-free bound {r.source_free_s:.1f} s"
                + (f" ({r.moving_s / r.source_free_s:.2f}x)" if r.moving_s is not None and r.source_free_s else ""))
        print(f"  {r.tool}: bound from {r.busiest}; {free}; " + "; ".join(r.notes))
        for line in r.left:
            print(f"      left (confluent-kafka): {line}")
        for line in r.config_command_left:
            print(f"      left (ConfigCommand): {line}")
