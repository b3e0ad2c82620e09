"""Planner input validation, the pluggable assignor, the KIP-73 estimate and the CLI (local engine)."""
from __future__ import annotations

import copy
import json
import textwrap

import pytest

from kafka_reassign.errors import SnapshotError
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.planning.spark import plan
from kafka_reassign.planning.spark import command as planner_cli
from kafka_reassign.errors import AssignorError, GoalError
from kafka_sim.generate import GenerateOptions, generate_snapshot

GB = 1_000_000_000


def tiny(rate: float = 0.0) -> dict:
    """3 racks x 2 brokers; topic t: partition 0 on 1,2,3 (1 GB), partition 1 on 4,5,6 (2 GB)."""
    brokers = [{"id": i, "rack": "abc"[(i - 1) % 3], "log_dirs": [{"path": "/d", "capacity_bytes": 100 * GB}]}
               for i in range(1, 7)]
    return {"version": 1, "brokers": brokers, "topics": [{
        "name": "t", "configs": {"min.insync.replicas": "2"},
        "partitions": [
            {"partition": 0, "replicas": [1, 2, 3], "leader": 1, "size_bytes": GB,
             "bytes_in_per_sec": rate, "log_dirs": ["/d"] * 3},
            {"partition": 1, "replicas": [4, 5, 6], "leader": 4, "size_bytes": 2 * GB,
             "bytes_in_per_sec": 0, "log_dirs": ["/d"] * 3}]}]}


# -- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("mutate, needle", [
    (lambda s: s.pop("brokers"), "brokers: missing or empty"),
    (lambda s: s.__setitem__("version", 2), "version: must be 1"),
    (lambda s: s["topics"][0]["partitions"][0].__setitem__("replicas", [1, 2, 42]),
     "topics[0].partitions[0] (t-0).replicas[2]: broker 42 is not in brokers"),
    (lambda s: s["topics"][0]["partitions"][0].__setitem__("replicas", [1, 1, 2]), "lists a broker twice"),
    (lambda s: s["topics"][0]["partitions"][1].__setitem__("size_bytes", -5), "size_bytes: must be a number >= 0"),
    (lambda s: s["brokers"].append({"id": 1, "rack": "a", "log_dirs": [{"path": "/d", "capacity_bytes": 1}]}),
     "appears twice"),
    (lambda s: s["brokers"][0]["log_dirs"][0].__setitem__("capacity_bytes", 0), "capacity_bytes: must be a positive"),
    (lambda s: s["topics"][0]["partitions"][0].__setitem__("log_dirs", ["/d", "/nope", "/d"]),
     "'/nope' is not a log dir of broker 2"),
    (lambda s: s["brokers"][0].__setitem__("rack", None), "either all brokers have broker.rack or none"),
    (lambda s: s["topics"][0]["partitions"][0].__setitem__("leader", 4),
     "topics[0].partitions[0] (t-0).leader: must be one of the replicas [1, 2, 3]"),
    (lambda s: s["brokers"][1].__setitem__("network_bytes_per_sec", 0),
     "brokers[1] (broker 2).network_bytes_per_sec: must be a positive number"),
])
def test_malformed_snapshot_errors_name_the_problem(mutate, needle):
    snap = tiny()
    mutate(snap)
    with pytest.raises(SnapshotError) as exc:
        plan(snap, "rebalance", engine="local")
    assert needle in str(exc.value)


def test_not_a_snapshot_at_all():
    with pytest.raises(SnapshotError, match="must be a JSON object"):
        plan([1, 2], "rebalance", engine="local")


@pytest.mark.parametrize("goal, options, needle", [
    ("shuffle", {}, "unknown goal 'shuffle'"),
    ("remove-brokers", {}, "remove-brokers needs --brokers"),
    ("add-brokers", {"brokers": [9]}, "unknown broker ids [9]"),
    ("rebalance", {"exclude_topics": ["nope"]}, "unknown topics ['nope']"),
    ("replication-factor", {"replication_factor": 7}, "replication factor 7 is above the 6 brokers"),
    ("rebalance", {"capacity_ceiling": 1.5}, "capacity_ceiling: must be in (0, 1]"),
    ("rebalance", {"colour": "blue"}, "colour: unknown planner option"),
    ("remove-brokers", {"brokers": [1], "exclude_brokers": [1]}, "both targeted and excluded"),
    ("remove-brokers", {"brokers": [1, 2, 3, 4]}, "only 2 brokers can hold replicas"),
    ("remove-brokers", {"brokers": [1], "exclude_topics": ["t"]}, "excluded topics ['t'] keep 1 replicas on"),
])
def test_impossible_goals_and_bad_options(goal, options, needle):
    with pytest.raises(GoalError) as exc:
        plan(tiny(), goal, engine="local", **options)
    assert needle in str(exc.value)


# -- pluggable assignor --------------------------------------------------------------------

ASSIGNORS = textwrap.dedent('''
    from kafka_reassign.planning.spark.assignor import ReplicaAssignor, Proposal

    class MoveToSix(ReplicaAssignor):
        """Move t-0's replica on broker 3 to broker 6 (same rack c), leader unchanged."""
        def assign(self, cluster, partitions):
            assert self.context is not None and self.context.options.goal == "custom"
            return {("t", 0): [1, 2, 6]}

    class WithDirs(ReplicaAssignor):
        def assign(self, cluster, partitions):
            return {("t", 0): Proposal((1, 2, 6), ("any", "any", "/d"))}

    class DuckTyped:
        def assign(self, cluster, partitions):
            return {("t", 1): [5, 4, 6]}

    class Raises(ReplicaAssignor):
        def assign(self, cluster, partitions):
            raise RuntimeError("no capacity model for this cluster")

    class UnknownBroker(ReplicaAssignor):
        def assign(self, cluster, partitions):
            return {("t", 0): [1, 2, 99]}

    class SameRack(ReplicaAssignor):
        def assign(self, cluster, partitions):
            return {("t", 0): [1, 4, 3]}   # 1 and 4 are both in rack a

    class Excluded(ReplicaAssignor):
        def assign(self, cluster, partitions):
            return {("t", 1): [4, 5, 3]}

    class NotAMapping(ReplicaAssignor):
        def assign(self, cluster, partitions):
            return [[1, 2, 3]]

    class BadInit(ReplicaAssignor):
        def __init__(self):
            raise ValueError("needs a config file")

        def assign(self, cluster, partitions):
            return {}

    class Abstract(ReplicaAssignor):
        pass

    class NoAssign:
        pass

    not_a_class = 3
''')


@pytest.fixture
def assignors(tmp_path, monkeypatch):
    (tmp_path / "my_assignors.py").write_text(ASSIGNORS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_assignors"


def test_user_assignor_good_class(assignors):
    res = plan(tiny(), "custom", engine="local", assignor=f"{assignors}.MoveToSix")
    assert res.plan.to_json()["partitions"] == [{"topic": "t", "partition": 0, "replicas": [1, 2, 6],
                                                "original_replicas": [1, 2, 3]}]
    s = res.summary
    assert s["assignor"] == f"{assignors}.MoveToSix"
    assert s["replica_movements"] == 1 and s["data_to_move_bytes"] == GB
    assert s["lower_bound_bytes"] is None  # unknown for a user's goal
    res = plan(tiny(), "custom", engine="local", assignor=f"{assignors}:WithDirs")
    assert res.plan.moves[0].log_dirs == ("any", "any", "/d")
    res = plan(tiny(), "custom", engine="local", assignor=f"{assignors}.DuckTyped")
    assert res.summary["leader_movements"] == 1 and res.summary["data_to_move_bytes"] == 0


@pytest.mark.parametrize("cls, options, needle", [
    ("Raises", {}, "RuntimeError: no capacity model for this cluster"),
    ("UnknownBroker", {}, "unknown brokers [99]"),
    ("SameRack", {}, "span 2 racks where 3 are possible"),
    ("Excluded", {"exclude_brokers": [6]}, "excluded brokers [6] gain or lose a replica"),
    ("Excluded", {"exclude_topics": ["t"]}, "was not offered to the assignor"),
    ("NotAMapping", {}, "must return a mapping"),
    ("BadInit", {}, "constructor failed: ValueError: needs a config file"),
    ("NoAssign", {}, "nor has an assign(cluster, partitions) method"),
    ("Abstract", {}, "does not implement assign"),
    ("not_a_class", {}, "is a int, not a class"),
    ("Missing", {}, "has no attribute 'Missing'"),
])
def test_user_assignor_failures_are_assignor_errors(assignors, cls, options, needle):
    with pytest.raises(AssignorError) as exc:
        plan(tiny(), "custom", engine="local", assignor=f"{assignors}.{cls}", **options)
    msg = str(exc.value)
    assert f"{assignors}.{cls}" in msg and needle in msg


def test_assignor_module_that_does_not_import():
    with pytest.raises(AssignorError, match="cannot import module 'no_such_pkg.mod'"):
        plan(tiny(), "custom", engine="local", assignor="no_such_pkg.mod.Cls")


def test_builtin_goals_implement_the_interface():
    from kafka_reassign.planning.spark import GOALS, ReplicaAssignor

    assert all(issubclass(g, ReplicaAssignor) for g in GOALS.values())
    # a built-in goal can be loaded by dotted path like a user's class
    res = plan(tiny(), "custom", engine="local", assignor="kafka_reassign.planning.spark.goals.RackRepair")
    assert res.plan.moves == []


# -- KIP-73 estimate ------------------------------------------------------------------------

def test_estimate_follows_kip73_and_warns_when_throttle_below_bytes_in(assignors):
    # 1 GB copied from leader 1 to broker 6 at 10 MB/s: 100 s
    res = plan(tiny(), "custom", engine="local", assignor=f"{assignors}.MoveToSix",
               throttle_bytes_per_sec=10_000_000)
    assert res.summary["estimated_seconds"] == pytest.approx(100.0, rel=1e-3)
    assert res.summary["warnings"] == []
    # t-0 written at 2 MB/s: leader 1's quota also records its 2 in-sync followers' 4 MB/s and
    # the new replica must keep up with the 2 MB/s written: 10 - 3 x 2 = 4 MB/s -> 250 s
    res = plan(tiny(rate=2_000_000), "custom", engine="local", assignor=f"{assignors}.MoveToSix",
               throttle_bytes_per_sec=10_000_000)
    assert res.summary["estimated_seconds"] == pytest.approx(250.0, rel=1e-3)
    # throttle at (k+1)P = 6 MB/s: never finishes
    res = plan(tiny(rate=2_000_000), "custom", engine="local", assignor=f"{assignors}.MoveToSix",
               throttle_bytes_per_sec=6_000_000)
    assert res.summary["estimated_seconds"] is None
    assert any("never finish" in w and "broker 1" in w for w in res.summary["warnings"])


def test_plan_is_ordered_for_the_executor_without_batches():
    snap = generate_snapshot(GenerateOptions(brokers=6, racks=3, topics=4, partitions=10, skew=1.0, seed=2))
    res = plan(snap, "rebalance", engine="local")
    s = res.summary
    assert s["batches"] is None and "sliding window" in s["batching"]
    size = {(t["name"], p["partition"]): p["size_bytes"] for t in snap["topics"] for p in t["partitions"]}
    old = {(t["name"], p["partition"]): p["replicas"] for t in snap["topics"] for p in t["partitions"]}
    # per receiving broker the copies come largest first; leader-only reorders come last
    seen: dict[int, float] = {}
    data_done = False
    for m in res.plan.moves:
        added = [b for b in m.replicas if b not in old[m.key]]
        if not added:
            data_done = True
            continue
        assert not data_done, "a data move after a leader-only reorder"
        copy_bytes = size[m.key] * len(added)
        assert copy_bytes <= seen.get(added[0], float("inf"))
        seen[added[0]] = copy_bytes


# -- CLI ------------------------------------------------------------------------------------

def test_cli_writes_plan_summary_chart_and_prints_one_line(tmp_path, capsys):
    snap = generate_snapshot(GenerateOptions(brokers=6, racks=3, topics=4, partitions=10, skew=1.0, seed=4))
    sp = tmp_path / "snap.json"
    sp.write_text(json.dumps(snap))
    out = tmp_path / "PLAN.json"
    rc = planner_cli.main(["--snapshot", str(sp), "--goal", "rebalance", "--out", str(out),
                           "--engine", "local", "--throttle", "50000000"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    for key in ("replica_movements", "data_to_move_bytes", "leader_movements", "batches",
                "balance_before", "balance_after", "estimated_seconds"):
        assert key in summary
    plan_obj = ReassignmentPlan.load(out)
    assert len(plan_obj.moves) == summary["partitions_moved"] > 0
    assert json.loads((tmp_path / "PLAN.summary.json").read_text())["data_to_move_bytes"] == \
        summary["data_to_move_bytes"]
    png = (tmp_path / "PLAN.chart.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_cli_bad_input_writes_nothing(tmp_path, capsys):
    sp = tmp_path / "snap.json"
    bad = tiny()
    bad["topics"][0]["partitions"][0]["replicas"] = [1, 2, 77]
    sp.write_text(json.dumps(bad))
    out = tmp_path / "PLAN.json"
    rc = planner_cli.main(["--snapshot", str(sp), "--goal", "rebalance", "--out", str(out),
                           "--engine", "local"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "broker 77 is not in brokers" in err
    assert not out.exists() and not (tmp_path / "PLAN.summary.json").exists()
    sp.write_text("{not json")
    assert planner_cli.main(["--snapshot", str(sp), "--goal", "rebalance", "--out", str(out),
                             "--engine", "local"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    sp.write_text(json.dumps(tiny()))
    assert planner_cli.main(["--snapshot", str(sp), "--goal", "replication-factor",
                             "--replication-factor", "9", "--out", str(out), "--engine", "local"]) == 2
    assert "above the 6 brokers" in capsys.readouterr().err
    assert not out.exists()


def test_kafka_reassign_plan_subcommand_is_wired(tmp_path, capsys):
    from kafka_reassign.cli.main import main

    sp = tmp_path / "snap.json"
    snap = tiny()
    snap["topics"][0]["partitions"][0]["replicas"] = [1, 4, 3]  # rack a twice
    sp.write_text(json.dumps(snap))
    out = tmp_path / "p.json"
    rc = main(["plan", "--snapshot", str(sp), "--goal", "rack-repair", "--out", str(out),
               "--engine", "local", "--no-chart"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["replica_movements"] == 1
    entry = ReassignmentPlan.load(out).moves[0]
    assert entry.replicas[0] == 1 and entry.replicas[2] == 3 and entry.replicas[1] in (2, 5)
    assert copy.deepcopy(summary)["lower_bound_bytes"] == GB


# -- snapshot-lines files, limits ---------------------------------------------------------------

def _lines(tmp_path, snap, edit=None):
    from kafka_reassign.planning.spark.snapshot_file import header_of, partition_lines, write_lines

    rows = list(partition_lines(snap))
    if edit:
        edit(rows)
    return write_lines(tmp_path / "snap.jsonl", header_of(snap), rows)


def _cli(tmp_path, snapshot, *extra):
    out = tmp_path / "PLAN.json"
    rc = planner_cli.main(["--snapshot", str(snapshot), "--out", str(out), "--engine", "local", "--no-chart",
                           *extra])
    return rc, out


def _bad_rows(rows):
    rows[0]["replicas"] = [1, 2, 77]
    del rows[1]["size_bytes"]
    rows.append(dict(rows[1], size_bytes=5))


@pytest.mark.parametrize("edit, args, needles", [
    (_bad_rows, ["--goal", "rebalance"],
     ["partition t-0: replicas [1, 2, 77] name brokers that are not in the header",
      "partition t-1: has no size_bytes", "partition t-1: appears 2 times"]),
    (None, ["--goal", "rebalance", "--capacity-ceiling", "0.01"],
     ["needs 1.5% of the placeable brokers' capacity, above capacity_ceiling=1%"]),
    (None, ["--goal", "remove-brokers", "--brokers", "1,2,3,4"], ["only 2 brokers can hold replicas"]),
    (None, ["--goal", "add-brokers", "--brokers", "42"], ["unknown broker ids [42]"]),
])
def test_snapshot_lines_problems_are_named_and_no_plan_is_written(tmp_path, capsys, edit, args, needles):
    rc, out = _cli(tmp_path, _lines(tmp_path, tiny(), edit), *args)
    err = capsys.readouterr().err
    assert rc == planner_cli.EXIT_BAD_INPUT
    for needle in needles:
        assert needle in err
    assert not out.exists() and not planner_cli.summary_path_for(out).exists()


def test_over_the_task_limit_or_past_the_deadline_fails_naming_the_setting(tmp_path, capsys):
    from kafka_reassign.planning.spark import plan_file
    from kafka_reassign.planning.spark.guard import PlanningTimeout, PlanTooLarge

    snap = generate_snapshot(GenerateOptions(brokers=6, racks=3, topics=4, partitions=10, skew=1.0, seed=2))
    path = _lines(tmp_path, snap)
    with pytest.raises(PlanTooLarge, match=r"above max_task_replicas=5 .*spark.executor.memory"):
        plan_file(str(path), "rebalance", engine="local", max_task_replicas=5)
    with pytest.raises(PlanningTimeout, match="timeout_seconds=1e-06"):
        plan_file(str(path), "rebalance", engine="local", timeout_seconds=0.000001)
    rc, out = _cli(tmp_path, path, "--goal", "rebalance", "--options", '{"max_task_replicas": 5}')
    assert rc == planner_cli.EXIT_FAILED and "max_task_replicas" in capsys.readouterr().err
    assert not out.exists()


def test_estimate_warns_when_the_network_cannot_carry_a_written_move(assignors):
    # Unthrottled, but 3 MB/s of network: leader 1 sends 2 x 2 MB/s to its in-sync followers
    # and the new replica needs 2 MB/s more: never finishes, and the warning says why.
    snap = tiny(rate=2_000_000)
    for b in snap["brokers"]:
        b["network_bytes_per_sec"] = 3_000_000
    res = plan(snap, "custom", engine="local", assignor=f"{assignors}.MoveToSix")
    assert res.summary["estimated_seconds"] is None
    assert any("never finish" in w and "network" in w and "1" in w for w in res.summary["warnings"])
