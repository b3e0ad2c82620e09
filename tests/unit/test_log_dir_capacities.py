"""Log dir capacities (issue 20): what brokers report (KIP-827 total and usable bytes) goes into
the snapshot with its source, and the operator's ``log_dir_capacity_bytes`` wins over it in the
snapshot and the planner's input; bad entries are refused before anything is read or written."""
from __future__ import annotations

import pytest

from kafka_reassign.cli import main as cli
from kafka_reassign.cluster.capacities import CapacityOverrides, apply_capacities, parse_capacities
from kafka_reassign.cluster.snapshot import read_cluster_snapshot, validate_snapshot
from kafka_reassign.cluster.state import BrokerInfo, ClusterState
from kafka_reassign.errors import ParamError, SnapshotError
from kafka_reassign.planning.spark.cluster import Cluster
from kafka_reassign.planning.validate import validate_params

GB = 10**9


class ReportingCluster:
    """A ClusterReader whose brokers report their volumes as DescribeLogDirs v4+ does."""

    def cluster_state(self, topics=None, include_log_dirs=False) -> ClusterState:
        brokers = {b: BrokerInfo(id=b, rack="abc"[b - 1], log_dirs=("/d1", "/d2"),
                                 capacity_bytes={"/d1": 100 * GB, "/d2": 200 * GB},
                                 usable_bytes={"/d1": 60 * GB, "/d2": 0}) for b in (1, 2, 3)}
        return ClusterState(brokers=brokers, topics={})


def dirs_of(snap: dict, broker: int) -> dict[str, dict]:
    return {d["path"]: d for b in snap["brokers"] if b["id"] == broker for d in b["log_dirs"]}


def test_snapshot_records_reported_total_and_usable_bytes_as_the_broker_s_capacity():
    snap = read_cluster_snapshot(ReportingCluster())
    validate_snapshot(snap, planning=True)
    assert dirs_of(snap, 2) == {
        "/d1": {"path": "/d1", "capacity_bytes": 100 * GB, "capacity_source": "broker",
                "total_bytes": 100 * GB, "usable_bytes": 60 * GB},
        "/d2": {"path": "/d2", "capacity_bytes": 200 * GB, "capacity_source": "broker",
                "total_bytes": 200 * GB, "usable_bytes": 0}}  # a full volume: 0, not "unknown"


def test_given_capacities_win_most_specific_first_in_snapshot_and_planner_input():
    caps = parse_capacities(["50GB", "2=80GB", "2:/d2=1TB"])
    snap = read_cluster_snapshot(ReportingCluster(), capacities=caps)
    got = {(b["id"], d["path"]): (d["capacity_bytes"], d["capacity_source"], d["total_bytes"])
           for b in snap["brokers"] for d in b["log_dirs"]}
    assert got[(1, "/d1")] == (50 * GB, "user", 100 * GB)  # the reported total stays beside it
    assert got[(2, "/d1")] == (80 * GB, "user", 100 * GB)
    assert got[(2, "/d2")] == (10**12, "user", 200 * GB)
    planner = Cluster.from_snapshot(snap)
    assert {(b, d.path): d.capacity_bytes for b, info in planner.brokers.items() for d in info.log_dirs} == \
        {k: float(v[0]) for k, v in got.items()}


def test_entries_naming_what_the_cluster_lacks_are_refused_and_change_nothing():
    snap = read_cluster_snapshot(ReportingCluster())
    with pytest.raises(ParamError) as err:
        apply_capacities(snap, parse_capacities(["1=1TB", "9=1TB", "2:/nope=1TB"]))
    assert err.value.kinds == {"unknown_broker", "unknown_log_dir"}
    assert "broker 9 is not in the cluster (brokers: 1, 2, 3)" in str(err.value)
    assert "'/nope' is not a log dir of broker 2 (/d1, /d2)" in str(err.value)
    assert dirs_of(snap, 1)["/d1"]["capacity_source"] == "broker"


@pytest.mark.parametrize("entries,reason", [
    (["0"], "capacity must be positive"),
    (["x=1TB"], "write SIZE, BROKER=SIZE or BROKER:LOG_DIR=SIZE"),
    (["3:=1TB"], "write SIZE, BROKER=SIZE or BROKER:LOG_DIR=SIZE"),
    (["lots"], "capacity 'lots' is not understood"),
    (["1TB", "1TB"], "an earlier entry already gives"),
    ([5], "must be a string such as"),
    ("1TB", "must be a list of strings"),
])
def test_bad_entries_are_refused_by_the_run_parameter_check(entries, reason):
    with pytest.raises(ParamError) as err:
        validate_params({"log_dir_capacity_bytes": entries})
    assert reason in str(err.value) and "log_dir_capacity_bytes" in str(err.value)


def test_parsed_entries_and_an_empty_parameter():
    assert parse_capacities(["2TiB", "3=500GB", "3:/data/d=1"]) == CapacityOverrides(
        every_dir=2 * 2**40, per_broker={3: 500 * GB}, per_dir={(3, "/data/d"): 1})
    assert not parse_capacities(()) and not parse_capacities(None)
    assert validate_params({"log_dir_capacity_bytes": ["3=500GB"]}).log_dir_capacity_bytes == ("3=500GB",)


def test_cli_snapshot_refuses_a_bad_capacity_before_connecting(capsys):
    code = cli.main(["snapshot", "--bootstrap-server", "127.0.0.1:1", "--out", "-", "--log-dir-capacity", "-5"])
    assert code == cli.EXIT_BAD_INPUT
    assert "--log-dir-capacity[0]" in capsys.readouterr().err


def test_snapshot_check_refuses_a_bad_source_or_reported_size():
    snap = read_cluster_snapshot(ReportingCluster())
    snap["brokers"][0]["log_dirs"][0].update(capacity_source="guess", usable_bytes=-3)
    with pytest.raises(SnapshotError) as err:
        validate_snapshot(snap)
    assert "capacity_source: must be 'broker' or 'user'" in str(err.value)
    assert "usable_bytes: must be a number >= 0" in str(err.value)
