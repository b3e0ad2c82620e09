"""Calibration of states: what a client sees of a reassignment, on the simulator and on real Kafka.

Each case creates a topic (on the real cluster filled with a few MB by ``kafka_local.load``,
on the simulator the same sizes in its snapshot) and drives it through the same
kafka-python admin calls on both sides (benchmarks/calibration.py's helpers), recording at
fixed points what the client sees: error codes by name, replica lists in order, the
``adding``/``removing`` lists of ListPartitionReassignments, leaders and ISR from Metadata,
ElectLeaders result codes, and (for the throttled move) what DescribeLogDirs reports of the
new replica, reduced to structural facts (present, ``isFuture``, monotonic growth).

Prints ``scenario | real Kafka | simulator | same?`` (one row per observation) and writes it
into docs/SIMULATOR.md between ``<!-- calibration-states:begin -->`` and ``-end -->``.

Run: ``.venv/bin/python -m benchmarks.calibration_states [--only NAME ...] [--no-docs]``
(``KAFKA_LOCAL_DIR`` reuses a running ``kafka-local`` cluster of 6 brokers, 3 racks, 2 dirs).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

from benchmarks import calibration as cal

BEGIN, END = "<!-- calibration-states:begin -->", "<!-- calibration-states:end -->"
MB = cal.MB
RATE = 1 * MB  # throttled rate of the slow moves: 6 MB take about 6 s
#: broker 5's follower rate where it must stay behind while 4 catches up: a quota sensor left
#: from an earlier case lets a first burst of up to a window (11 s) of its rate through
HOLD_RATE = 200_000
#: broker 4's follower rate while a 1 MB partition's copy to it must still be listed: a window's
#: burst (12 samples at most) of it is under 1 MB, so the copy cannot end before it is read
GROW_HOLD_RATE = 50_000
SETTLE_S = 0.5  # Metadata is read until two reads this far apart agree (brokers' caches lag)
DONE_S = 60.0  # a move or cancel not finished by then fails the case

Observations = dict[str, object]


@dataclass(frozen=True)
class Case:
    """One state scenario: the topic's layout (and throttle) and what runs against it."""

    name: str
    layout: cal.Scenario  # partitions' replicas and sizes; set_throttle's lists and rates
    run: Callable[[str, "Case", str], Observations]  # (bootstrap, case, topic) -> observations
    fast: bool = False  # seconds on the real side: tests/real_kafka/test_calibration_states.py runs it


# ------------------------------------------------------------------ what a client sees
def err_name(err: object) -> str:
    """Name and code of an error class from kafka-python (None: NONE), e.g. ``NOT_CONTROLLER (41)``."""
    if err is None:
        return "NONE"
    return f"{getattr(err, 'message', getattr(err, '__name__', err))} ({getattr(err, 'errno', '?')})"


def alter(admin, topic: str, targets: Mapping[int, list[int] | None]) -> dict[int, str]:
    """AlterPartitionReassignments of ``topic``'s partitions: partition -> error name."""
    from kafka.structs import TopicPartition
    res = admin.alter_partition_reassignments({TopicPartition(topic, p): t for p, t in targets.items()})
    return {tp.partition: err_name(e) for tp, e in sorted(res.items())}


def listing(admin, topic: str) -> dict[int, str]:
    """ListPartitionReassignments of ``topic``: partition -> its replicas/adding/removing, in order."""
    rows = admin.list_partition_reassignments({topic: list(range(8))})
    return {tp.partition: f"replicas {r['replicas']} adding {r['adding_replicas']} removing {r['removing_replicas']}"
            for tp, r in sorted(rows.items())}


def _metadata(admin, topic: str) -> dict[int, dict[str, object]]:
    (desc,) = admin.describe_topics([topic])
    return {p["partition_index"]: {"replicas": list(p["replica_nodes"]), "leader": p["leader_id"],
                                   "epoch": p["leader_epoch"], "isr": list(p["isr_nodes"])}
            for p in sorted(desc["partitions"], key=lambda x: x["partition_index"])}


def state(admin, topic: str) -> dict[int, dict[str, object]]:
    """Replicas, leader and ISR per partition, once two Metadata reads ``SETTLE_S`` apart agree."""
    last = _metadata(admin, topic)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        time.sleep(SETTLE_S)
        now = _metadata(admin, topic)
        if now == last:
            return now
        last = now
    return last


def elect_preferred(admin, topic: str, partitions: list[int], election_type: int = 0) -> dict[int, str]:
    """ElectLeaders (preferred, or unclean with ``election_type`` 1) of ``partitions``: partition -> error name."""
    from kafka.errors import for_code
    resp = admin.elect_leaders(election_type, {topic: partitions}, raise_errors=False)
    return {r.partition_id: err_name(None if r.error_code == 0 else for_code(r.error_code))
            for res in resp.replica_election_results for r in res.partition_result}


def wait_no_reassignment(admin, topic: str) -> None:
    """Until ListPartitionReassignments of ``topic`` is empty (``DONE_S`` at most)."""
    cal.wait_until(lambda: not listing(admin, topic), DONE_S, f"the reassignments of {topic} to finish")


def throttled(bootstrap: str, case: Case, topic: str, on: bool) -> None:
    """Set (then wait for brokers to apply) or remove the case's throttle."""
    cal.set_throttle(bootstrap, case.layout, topic, on)
    if on:
        time.sleep(cal.CONFIG_SETTLE_S)


@contextlib.contextmanager
def held(switch: Callable[[bool], None]) -> Iterator[None]:
    """``switch(True)`` for the duration, ``switch(False)`` after, whatever happened."""
    switch(True)
    try:
        yield
    finally:
        switch(False)


def _with_admin(bootstrap: str, body: Callable[[object], Observations]) -> Observations:
    admin = cal._admin(bootstrap)
    try:
        return body(admin)
    finally:
        admin.close()


# ------------------------------------------------------------------ the cases
Action = Callable[[object, str], object]  # (admin, topic) -> what the client saw
Run = Callable[[str, Case, str], Observations]


def to(target: list[int] | None) -> Action:
    """AlterPartitionReassignments of partition 0 to ``target`` (None: cancel)."""
    return lambda admin, topic: alter(admin, topic, {0: target})


def in_sync_state(brokers: set[int]) -> Action:
    """Wait until ``brokers`` are in partition 0's ISR, then its state."""
    def act(admin, topic: str) -> object:
        cal.wait_until(lambda: brokers <= set(_metadata(admin, topic)[0]["isr"]), 30.0,
                       f"replicas {sorted(brokers)} to join the ISR")
        return state(admin, topic)
    return act


def done_state(admin, topic: str) -> object:
    """The state once no reassignment of ``topic`` is listed."""
    wait_no_reassignment(admin, topic)
    return state(admin, topic)


def hold_follower(broker: int, partition: int, rate: int) -> Callable[[str, Case, str, bool], None]:
    """A hold: a follower throttle on ``broker`` for ``partition`` only (no leader throttle), so
    that copy is slow and every other one goes at once."""
    def hold(bootstrap: str, case: Case, topic: str, on: bool) -> None:
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

        def op(value: object) -> tuple:
            return (AlterConfigOp.SET, str(value)) if on else (AlterConfigOp.DELETE, None)
        cal.apply_configs(bootstrap, [
            ConfigResource(ConfigResourceType.BROKER, str(broker), {"follower.replication.throttled.rate": op(rate)}),
            ConfigResource(ConfigResourceType.TOPIC, topic,
                           {"follower.replication.throttled.replicas": op(f"{partition}:{broker}")})])
        if on:
            time.sleep(cal.CONFIG_SETTLE_S)
    return hold


def held_steps(steps: Sequence[tuple[str, Action]], after: Sequence[tuple[str, Action]],
               hold: Callable[[str, Case, str, bool], None] = throttled) -> Run:
    """A case: ``steps`` while ``hold`` (default: the case's throttle) is on, ``after`` once it is off.

    :param steps: (observation name, action) run in order under the hold
    :param after: the same, run after the hold is removed
    """
    def run(bootstrap: str, case: Case, topic: str) -> Observations:
        def body(admin) -> Observations:
            obs: Observations = {}
            with held(lambda on: hold(bootstrap, case, topic, on)):
                obs.update((name, act(admin, topic)) for name, act in steps)
            obs.update((name, act(admin, topic)) for name, act in after)
            return obs
        return _with_admin(bootstrap, body)
    return run


#: KIP-455: [1,2,3] -> [4,2,3] throttled, then [5,2,3] submitted for the same partition
new_target_mid_move = held_steps(
    [("alter [4,2,3]", to([4, 2, 3])), ("listing, first target", listing),
     ("alter [5,2,3]", to([5, 2, 3])), ("listing, second target", listing)],
    [("final", done_state)])

#: a cancel while 4 still copies; listed at once: a real broker may copy its first
#: megabytes before the throttle bites
cancel_not_in_sync = held_steps(
    [("alter [4,2,3]", to([4, 2, 3])), ("listing", listing), ("cancel", to(None)),
     ("listing after cancel", listing)],
    [("final", state)])

#: [1,2,3] -> [4,5,3], cancelled once 4 joined the ISR while 5 is held by its throttle
cancel_in_sync = held_steps(
    [("alter [4,5,3]", to([4, 5, 3])), ("state, 4 in sync", in_sync_state({4})),
     ("listing, 4 in sync", listing), ("cancel", to(None)), ("listing after cancel", listing)],
    [("final", state)], hold=hold_follower(5, 0, HOLD_RATE))


def original_target_after(*targets: list[int]) -> Run:
    """[1,2,3] -> each of ``targets`` throttled, then the original [1,2,3] as the new target.

    Kafka 4.3.1 never completes it (a replica both adding and removing): once the added
    replicas caught up, the listing is read again and the reassignment cancelled.
    """
    added = {b for t in targets for b in t} - {1, 2, 3}
    return held_steps(
        [*((f"alter {t}", to(t)) for t in targets), ("alter [1, 2, 3]", to([1, 2, 3])),
         ("listing after [1, 2, 3]", listing)],
        [("state, all in sync", in_sync_state(added)), ("listing, all in sync", listing),
         ("cancel", to(None)), ("final", done_state)])


def order_only(bootstrap: str, case: Case, topic: str) -> Observations:
    """[1,2,3] -> [3,1,2]: no replica moves, only the order (and so the preferred leader) changes."""
    def body(admin) -> Observations:
        obs: Observations = {"alter [3,1,2]": alter(admin, topic, {0: [3, 1, 2]}),
                             "listing": listing(admin, topic)}
        obs["after alter"] = state(admin, topic)
        obs["preferred election"] = elect_preferred(admin, topic, [0])
        obs["after election"] = state(admin, topic)
        obs["preferred election again"] = elect_preferred(admin, topic, [0])
        obs["unclean election, leader alive"] = elect_preferred(admin, topic, [0], election_type=1)
        return obs
    return _with_admin(bootstrap, body)


def preferred_after_move(bootstrap: str, case: Case, topic: str) -> Observations:
    """p0 [1,2,3] -> [4,2,3] (the leader leaves), p1 [1,2,3] -> [4,1,2] (the leader stays), then elections."""
    def body(admin) -> Observations:
        obs: Observations = {"alter": alter(admin, topic, {0: [4, 2, 3], 1: [4, 1, 2]})}
        wait_no_reassignment(admin, topic)
        obs["after move"] = state(admin, topic)
        obs["preferred election"] = elect_preferred(admin, topic, [0, 1])
        obs["after election"] = state(admin, topic)
        obs["preferred election again"] = elect_preferred(admin, topic, [0, 1])
        return obs
    return _with_admin(bootstrap, body)


#: p0 [1,2,3] -> [2,3] (shrink, the leader leaves), p1 [1,2,3] -> [1,2,3,4] (grow). The copy to 4
#: is held while the listing is read: unheld, 1 MB was sometimes copied before the read on one
#: side and not on the other (a loaded machine's real broker, a simulator in real time)
replication_factor_change = held_steps(
    [("alter", lambda admin, topic: alter(admin, topic, {0: [2, 3], 1: [1, 2, 3, 4]})), ("listing", listing)],
    [("final", done_state)], hold=hold_follower(4, 1, GROW_HOLD_RATE))


def _new_replica_dirs(admin, topic: str, broker: int) -> list[tuple[int, bool]]:
    """(size, isFuture) of partition 0 in each of ``broker``'s log dirs that holds it."""
    (row,) = admin.describe_log_dirs({topic: [0]}, brokers=[broker])
    return [(p["partition_size"], bool(p["is_future_key"])) for d in row["log_dirs"]
            for t in d["topics"] if t["name"] == topic for p in t["partitions"] if p["partition_index"] == 0]


def _samples(admin, topic: str) -> tuple[list[str], list[list[tuple[int, bool]]]]:
    """Every second until the listing is empty: the listing of partition 0 and broker 4's dirs."""
    listings, dirs = [], []
    deadline = time.monotonic() + DONE_S
    while time.monotonic() < deadline:
        now = listing(admin, topic)
        if not now:
            return listings, dirs
        listings.append(now[0])
        dirs.append(_new_replica_dirs(admin, topic, 4))
        time.sleep(1.0)
    raise TimeoutError(f"{topic}: the throttled move did not finish in {DONE_S:.0f} s")


def throttled_move_listing(bootstrap: str, case: Case, topic: str) -> Observations:
    """[1,2,3] -> [4,2,3] at 1 MB/s, sampled every second: listing and the new replica's log dir."""
    def body(admin) -> Observations:
        with held(lambda on: throttled(bootstrap, case, topic, on)):
            accepted = alter(admin, topic, {0: [4, 2, 3]})
            # 4 leads the target but is not in the ISR yet
            election = elect_preferred(admin, topic, [0])
            listings, dirs = _samples(admin, topic)
        sizes = [d[0][0] for d in dirs if len(d) == 1]
        final_4, final_2 = _new_replica_dirs(admin, topic, 4), _new_replica_dirs(admin, topic, 2)
        return {"alter [4,2,3]": accepted, "preferred election mid-move": election,
                "listings during the move (distinct)": sorted(set(listings)),
                # the real broker creates the log a moment after the reassignment starts: only
                # samples where it exists count
                "dirs holding the new replica (once it exists)": sorted({len(d) for d in dirs if d}),
                "isFuture seen": sorted({fut for d in dirs for _s, fut in d}),
                "size never shrinks": all(a <= b for a, b in zip(sizes, sizes[1:])),
                "size grew over >= 3 samples": len(set(sizes)) >= 3,
                "final size equals broker 2's": [s for s, _f in final_4] == [s for s, _f in final_2],
                "final": state(admin, topic)}
    return _with_admin(bootstrap, body)


def bad_requests(bootstrap: str, case: Case, topic: str) -> Observations:
    """Error codes of refused AlterPartitionReassignments, one request each."""
    from kafka.structs import TopicPartition

    def body(admin) -> Observations:
        unknown_topic = admin.alter_partition_reassignments({TopicPartition(f"{topic}-absent", 0): [1, 2, 3]})
        return {"nonexistent broker [1,2,99]": alter(admin, topic, {0: [1, 2, 99]}),
                "duplicate broker [1,1,2]": alter(admin, topic, {0: [1, 1, 2]}),
                "unknown partition 7": alter(admin, topic, {7: [1, 2, 3]}),
                "unknown topic": sorted(err_name(e) for e in unknown_topic.values()),
                "cancel, none in progress": alter(admin, topic, {0: None}),
                "listing of an unknown topic": admin.list_partition_reassignments({f"{topic}-absent": [0]}),
                "preferred election of an unknown partition": elect_preferred(admin, topic, [7]),
                "state": state(admin, topic)}
    return _with_admin(bootstrap, body)


def cases() -> list[Case]:
    """Every state scenario; sizes of a few MB, throttles of 1 MB/s."""
    def layout(name: str, moves: dict, size: int) -> cal.Scenario:
        return cal.Scenario(name, moves, size, RATE)
    one = {0: ((1, 2, 3), (4, 2, 3))}
    return [
        Case("bad requests", layout("bad", {0: ((1, 2, 3), (1, 2, 3))}, MB), bad_requests, fast=True),
        Case("replica order only", layout("order", {0: ((1, 2, 3), (3, 1, 2))}, MB), order_only, fast=True),
        # the throttle covers 4 and 5: both targets copy at 1 MB/s
        Case("new target mid-move", layout("kip455", {0: ((1, 2, 3), (4, 5, 2, 3))}, 6 * MB),
             new_target_mid_move),
        Case("cancel, adding not in sync", layout("cancel", one, 6 * MB), cancel_not_in_sync),
        Case("original target mid-move", layout("revert", one, 6 * MB), original_target_after([4, 2, 3])),
        Case("original target after two targets", layout("revert2", {0: ((1, 2, 3), (4, 5, 2, 3))}, 6 * MB),
             original_target_after([4, 2, 3], [5, 2, 3])),
        Case("cancel, one adding in sync", layout("cancel-isr", {0: ((1, 2, 3), (4, 5, 3))}, 12 * MB), cancel_in_sync),
        Case("preferred election after move", layout("elect", {0: one[0], 1: ((1, 2, 3), (4, 1, 2))}, MB),
             preferred_after_move, fast=True),
        Case("replication factor change", layout("rf", {0: ((1, 2, 3), (2, 3)), 1: ((1, 2, 3), (1, 2, 3, 4))}, MB),
             replication_factor_change, fast=True),
        Case("throttled move: listing, log dirs", layout("logdirs", one, 10 * MB), throttled_move_listing),
    ]


# ------------------------------------------------------------------ the two sides
def on_real(bootstrap: str, case: Case, topic: str) -> Observations:
    """Create and fill ``topic`` on the real cluster, run the case, delete the topic."""
    cal.prepare_real(bootstrap, case.layout, topic)
    try:
        return case.run(bootstrap, case, topic)
    finally:
        cal._delete_topic(bootstrap, topic)


def on_simulator(case: Case, topic: str = "calibration-states") -> Observations:
    """Run the case on a fresh SimulatedCluster of the same shape, in real time."""
    from kafka_sim import SimulatedCluster
    with SimulatedCluster(cal.sim_snapshot(case.layout, topic), time_scale=1.0) as cluster:
        return case.run(cluster.bootstrap_servers, case, topic)


def render(value: object) -> str:
    """One table cell: dicts as ``key: value; ...``, lists compact, pipes escaped."""
    if value in ({}, []):
        return "(none)"
    if isinstance(value, dict):
        text = "; ".join(f"{k}: {render(v)}" for k, v in value.items())
    elif isinstance(value, list):
        text = "[" + ", ".join(render(v) for v in value) + "]"
    elif isinstance(value, tuple):
        text = "(" + ", ".join(render(v) for v in value) + ")"
    else:
        text = str(value)
    return text.replace("|", "\\|")


def differences(real: Observations, sim: Observations) -> list[str]:
    """Observation names whose values differ between the sides (missing on one side counts)."""
    return [k for k in dict.fromkeys([*real, *sim]) if real.get(k, "(absent)") != sim.get(k, "(absent)")]


def table(rows: Sequence[tuple[Case, Observations, Observations]]) -> str:
    """Markdown table: one row per observation of each case."""
    lines = ["| scenario | real Kafka | simulator | same? |", "|---|---|---|---|"]
    for case, real, sim in rows:
        for key in dict.fromkeys([*real, *sim]):
            r, s = real.get(key, "(absent)"), sim.get(key, "(absent)")
            lines.append(f"| {case.name}: {key} | {render(r)} | {render(s)} | {'yes' if r == s else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every case on both sides, print the table and write it into docs/SIMULATOR.md."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="case name prefixes to run")
    ap.add_argument("--no-docs", action="store_true", help="print only, leave docs/SIMULATOR.md alone")
    args = ap.parse_args(argv or [])
    chosen = [c for c in cases() if not args.only or any(c.name.startswith(o) for o in args.only)]
    rows: list[tuple[Case, Observations, Observations]] = []
    stamp = int(time.time())
    with cal.real_cluster() as bootstrap:
        for i, case in enumerate(chosen):
            real = on_real(bootstrap, case, f"calibration-states-{stamp}-{i}")
            sim = on_simulator(case)
            print(f"  {case.name}: {'same' if real == sim else 'differs: ' + ', '.join(differences(real, sim))}",
                  flush=True)
            rows.append((case, real, sim))
    text = table(rows)
    print(text)
    if not args.no_docs and not args.only:
        cal.write_docs(text, begin=BEGIN, end=END)
    return 0 if all(r == s for _c, r, s in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
