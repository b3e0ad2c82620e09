"""Snapshot files and ClusterState.from_snapshot (kafka_reassign.cluster.snapshot, kafka_reassign.cluster.state)."""
from __future__ import annotations

import json

import pytest

from kafka_reassign.errors import SnapshotError
from kafka_reassign.cluster.snapshot import load_snapshot, save_snapshot, validate_snapshot
from kafka_reassign.cluster.state import ClusterState

SNAP = {"version": 1,
        "brokers": [{"id": 1, "rack": "a", "log_dirs": [{"path": "/d1", "capacity_bytes": 1e12}]},
                    {"id": 2, "rack": "b", "log_dirs": [{"path": "/d1", "capacity_bytes": 1e12}]},
                    {"id": 3, "rack": "c", "alive": False, "log_dirs": []}],
        "topics": [{"name": "t", "configs": {"min.insync.replicas": "2"},
                    "partitions": [{"partition": 0, "replicas": [1, 2, 3], "leader": 1, "size_bytes": 123,
                                    "bytes_in_per_sec": 5, "log_dirs": ["/d1", "/d1", "/d1"]}]}]}


def test_round_trip_and_state(tmp_path):
    path = tmp_path / "s.json"
    save_snapshot(SNAP, path)
    assert load_snapshot(path) == json.loads(json.dumps(SNAP))
    st = ClusterState.from_snapshot(SNAP)
    p = st.partition("t", 0)
    assert p.replicas == (1, 2, 3) and p.offline == (3,) and p.isr == (1, 2) and p.size_bytes == 123
    assert st.min_isr("t") == 2 and st.alive_brokers == {1, 2} and st.brokers[1].log_dirs == ("/d1",)


@pytest.mark.parametrize("mutate, fragment", [
    (lambda s: s.update(version=2), "version: must be 1"),
    (lambda s: s["brokers"].append({"id": 1}), "duplicate broker id 1"),
    (lambda s: s["topics"][0]["partitions"][0].update(replicas=[1, 9]),
     "topics[0].partitions[0] (t-0).replicas[1]: broker 9 is not in brokers"),
    (lambda s: s["topics"][0]["partitions"][0].update(size_bytes=-1), "size_bytes: must be a number >= 0"),
    (lambda s: s["topics"][0]["partitions"][0].update(log_dirs=["/d1"]), "log_dirs: must be a list as long"),
    (lambda s: s["topics"].append({"name": "t", "partitions": []}), "duplicate topic 't'"),
    (lambda s: s["brokers"][0]["log_dirs"].append({"path": "/d1"}),
     "brokers[0] (broker 1).log_dirs[1]: log dir /d1 appears twice"),
    (lambda s: s["topics"][0]["configs"].update({"min.insync.replicas": "two"}),
     "topics[0] (t).configs.min.insync.replicas: must be an integer"),
    (lambda s: s["topics"][0]["partitions"][0].update(size_bytes=float("nan")), "size_bytes: must be a number >= 0"),
])
def test_validation_names_the_field(mutate, fragment):
    snap = json.loads(json.dumps(SNAP))
    mutate(snap)
    with pytest.raises(SnapshotError) as info:
        validate_snapshot(snap)
    assert fragment in str(info.value)


def test_planning_requires_more_than_the_format():
    # the format allows a dead broker without log dirs; the planner needs capacities to place replicas
    validate_snapshot(SNAP)
    with pytest.raises(SnapshotError) as info:
        validate_snapshot(SNAP, planning=True)
    assert "brokers[2] (broker 3).log_dirs: missing or empty" in str(info.value)
    assert info.value.kinds == {"no_log_dirs"}


def test_bad_file(tmp_path):
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(SnapshotError, match="not valid JSON"):
        load_snapshot(tmp_path / "x.json")
