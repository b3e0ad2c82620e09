"""The snapshot's ``consumer_bytes_per_sec`` (issue 23): measured from the consumer groups'
committed offsets over the produce-rate sampling interval, left out (one warning) where the
cluster cannot answer, and checked like ``bytes_in_per_sec``."""
from __future__ import annotations

import logging

import pytest

from kafka_reassign.cluster import consumers, snapshot
from kafka_reassign.cluster.snapshot import read_cluster_snapshot, snapshot_problems, validate_snapshot
from kafka_reassign.cluster.state import BrokerInfo, ClusterState, PartitionInfo, TopicInfo
from kafka_reassign.errors import KafkaAdminError

LOG = {("read", 0): (0, 1000), ("read", 1): (0, 1000), ("unread", 0): (0, 1000)}  # start, end offsets
BYTES = 100_000  # each log: 100 bytes per offset


class GroupsCluster:
    """A cluster of one broker and three partitions whose groups commit as the test scripts it.

    :param commits: the group offsets answered by each successive group read
    """

    def __init__(self, commits: list[dict] | Exception) -> None:
        self.commits = commits

    def cluster_state(self, include_log_dirs: bool = True, topics: list[str] | None = None) -> ClusterState:
        parts = {t: TopicInfo(t, {p: PartitionInfo(t, p, (1,), (1,), 1, size_bytes=BYTES)
                                  for (name, p) in LOG if name == t}) for t in ("read", "unread")}
        return ClusterState(brokers={1: BrokerInfo(1, log_dirs=("/d",), capacity_bytes={"/d": 10**9})}, topics=parts)

    def describe_configs(self, broker_ids=(), topics=(), keys=None) -> dict:
        return {}

    def describe_sourced(self, broker_ids=(), topics=(), keys=None):  # noqa: ANN201 - unused here
        raise NotImplementedError

    def group_offsets(self) -> dict:
        if isinstance(self.commits, Exception):
            raise self.commits
        return self.commits.pop(0)

    def list_offsets(self, partitions, latest: bool = True) -> dict:
        return {k: LOG[k][1 if latest else 0] for k in partitions if k in LOG}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Virtual time: the snapshot's sleep advances the clock the groups' reads are stamped with."""
    now = [0.0]
    monkeypatch.setattr(consumers.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(snapshot.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    return now


def parts(snap: dict) -> dict[tuple[str, int], dict]:
    return {(t["name"], p["partition"]): p for t in snap["topics"] for p in t["partitions"]}


def test_groups_committed_offsets_become_bytes_per_second_per_partition(clock: list[float]) -> None:
    before = {"a": {("read", 0): 10, ("read", 1): 5}, "b": {("read", 0): 0}}
    after = {"a": {("read", 0): 110, ("read", 1): 5}, "b": {("read", 0): 100}, "new": {("read", 1): 500}}
    snap = read_cluster_snapshot(GroupsCluster([before, after]), sample_seconds=10)
    validate_snapshot(snap, planning=True)
    got = {k: p.get("consumer_bytes_per_sec") for k, p in parts(snap).items()}
    # read-0: two groups x 100 offsets x 100 bytes over 10 s; read-1: a group that did not
    # advance and one that only appeared; unread: no group
    assert got == {("read", 0): 2000.0, ("read", 1): 0.0, ("unread", 0): 0.0}


@pytest.mark.parametrize("cluster", [GroupsCluster(KafkaAdminError("ListGroups", "UNSUPPORTED_VERSION", "no")),
                                     GroupsCluster(KafkaAdminError("OffsetFetch", "COORDINATOR_NOT_AVAILABLE", "x"))])
def test_a_cluster_that_cannot_answer_leaves_the_field_out_with_one_warning(
        cluster: GroupsCluster, clock: list[float], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=consumers.__name__):
        snap = read_cluster_snapshot(cluster, sample_seconds=5)
    validate_snapshot(snap, planning=True)
    assert all("consumer_bytes_per_sec" not in p for p in parts(snap).values())
    warned = [r.getMessage() for r in caplog.records if "consumer bytes not measured" in r.getMessage()]
    assert len(warned) == 1 and "consumer_fanout" in warned[0]


def test_without_sampling_no_group_is_read(clock: list[float]) -> None:
    cluster = GroupsCluster([])  # a read would fail: pop from an empty list
    assert all("consumer_bytes_per_sec" not in p for p in parts(read_cluster_snapshot(cluster)).values())


@pytest.mark.parametrize("value, ok", [(0, True), (12.5, True), (None, True), (-1, False), ("3", False),
                                       (float("nan"), False), (True, False)])
def test_the_field_is_checked_like_bytes_in_per_sec(value: object, ok: bool, clock: list[float]) -> None:
    snap = read_cluster_snapshot(GroupsCluster([]))
    snap["topics"][0]["partitions"][0]["consumer_bytes_per_sec"] = value
    problems = snapshot_problems(snap)
    assert (problems == []) is ok
    if not ok:
        assert [(p.kind, p.entry.endswith(".consumer_bytes_per_sec")) for p in problems] == [("bad_rate", True)]
