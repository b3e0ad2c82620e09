"""Tiered storage (KIP-405, KIP-1023): the remote-bytes estimate, the snapshot field, what the
estimate and the planner count (the local log a move copies) and what they report beside it."""
from __future__ import annotations

from typing import Iterable

import pytest

from kafka_reassign.cluster.snapshot import remote_sizes, snapshot_problems, with_remote_sizes
from kafka_reassign.cluster.state import ClusterState, TopicPartition
from kafka_reassign.cluster.tiered import TieredOffsets, is_tiered
from kafka_reassign.planning.plan_estimate import PlannedMove, estimate_plan
from kafka_reassign.planning.spark import plan
from sim_snapshots import make_snapshot

MB = 1_000_000


def test_remote_bytes_scale_the_remote_offsets_by_the_local_logs_bytes_per_offset():
    # 900 offsets remote, 100 local holding 100 MB: 1 MB per offset, so 900 MB remote
    assert TieredOffsets(log_start=0, local_start=900, log_end=1000).remote_bytes(100 * MB) == 900 * MB
    # retention moved the log start: only the offsets still in remote storage count
    assert TieredOffsets(log_start=400, local_start=900, log_end=1000).remote_bytes(100 * MB) == 500 * MB


@pytest.mark.parametrize("offsets, local", [
    (TieredOffsets(0, 0, 1000), 100 * MB),      # nothing tiered yet: the whole log is local
    (TieredOffsets(0, 900, 900), 100 * MB),     # an empty local log gives no bytes per offset
    (TieredOffsets(0, 900, 1000), 0),           # no local bytes: nothing to scale by
    (TieredOffsets(950, 900, 1000), 100 * MB),  # inconsistent answers (log start above local start)
])
def test_remote_bytes_are_zero_when_the_offsets_give_no_measure(offsets, local):
    assert offsets.remote_bytes(local) == 0


def test_remote_storage_enable_turns_tiering_on():
    assert is_tiered({"remote.storage.enable": "true"}) and is_tiered({"remote.storage.enable": " TRUE "})
    assert not is_tiered({"remote.storage.enable": "false"}) and not is_tiered({})
    assert not is_tiered({"remote.storage.enable": None})


def _tiered_snapshot() -> dict:
    snap = make_snapshot(brokers=4, racks=2, dirs_per_broker=1, topics={
        "logs": {"partitions": 2, "rf": 2, "size_bytes": 2 * MB, "configs": {"remote.storage.enable": "true"}},
        "plain": {"partitions": 2, "rf": 2, "size_bytes": 2 * MB}})
    for p in snap["topics"][0]["partitions"]:
        p["remote_bytes"] = 300 * MB
    return snap


def test_snapshot_field_is_checked_and_read():
    snap = _tiered_snapshot()
    assert snapshot_problems(snap, planning=True) == []
    state = ClusterState.from_snapshot(snap)
    assert state.partition("logs", 0).remote_bytes == 300 * MB and state.partition("logs", 0).size_bytes == 2 * MB
    assert state.partition("plain", 0).remote_bytes == 0
    snap["topics"][0]["partitions"][1]["remote_bytes"] = -5
    (problem,) = snapshot_problems(snap)
    assert problem.entry == "topics[0].partitions[1] (logs-1).remote_bytes" and problem.kind == "bad_size"
    assert "must be a number >= 0, got -5" in problem.reason


class OffsetsReader:
    """A live-cluster reader: topic configs and the tiered partitions' offsets, each call recorded."""

    def __init__(self, state: ClusterState, tiered: set[str]) -> None:
        self.state, self.tiered, self.asked = state, tiered, []  # type: list[list[TopicPartition]]

    def cluster_state(self, include_log_dirs: bool = True, topics: list[str] | None = None) -> ClusterState:
        return self.state

    def describe_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> dict:
        return {("topic", t): {"remote.storage.enable": "true" if t in self.tiered else None} for t in topics}

    def describe_sourced(self, broker_ids=(), topics=(), keys=None):  # noqa: ANN001, ANN201 - unused here
        raise AssertionError("not read")

    def tiered_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, TieredOffsets]:
        keys = list(partitions)
        self.asked.append(keys)
        return {k: TieredOffsets(0, 3000, 3020) for k in keys if k != ("logs", 1)}  # logs-1 unanswered


def test_remote_sizes_ask_only_tiered_topics_and_leave_unanswered_partitions_out():
    snap = _tiered_snapshot()
    for t in snap["topics"]:
        for p in t["partitions"]:
            p.pop("remote_bytes", None)
    reader = OffsetsReader(ClusterState.from_snapshot(snap), {"logs"})
    assert remote_sizes(reader, reader.state) == {"logs": {0: 300 * MB}}  # 2 MB / 20 offsets x 3000
    assert reader.asked == [[("logs", 0), ("logs", 1)]]
    untiered = OffsetsReader(reader.state, set())
    assert remote_sizes(untiered, untiered.state) == {} and untiered.asked == []  # no ListOffsets at all
    state = with_remote_sizes(reader, reader.state, ["logs", "plain"])
    assert [p.remote_bytes for p in state.partitions()] == [300 * MB, 0, 0, 0]


def test_estimate_counts_the_local_bytes_and_names_the_remote_ones():
    moves = [PlannedMove("logs", 0, (1, 2), (3, 4), size_bytes=2 * MB, leader=1, remote_bytes=300 * MB),
             PlannedMove("plain", 0, (1, 2), (1, 3), size_bytes=2 * MB, leader=1)]
    local_only = [PlannedMove("logs", 0, (1, 2), (3, 4), size_bytes=2 * MB, leader=1), moves[1]]
    est, _ = estimate_plan(moves, rate=1 * MB)
    plain, _ = estimate_plan(local_only, rate=1 * MB)
    assert est.bytes_total == 3 * 2 * MB and est.seconds == pytest.approx(plain.seconds)
    assert est.detail == {"remote_bytes": 300 * MB} and plain.detail == {}
    assert "300.0 MB in remote storage not copied" in est.describe()
    assert "remote" not in plain.describe()


@pytest.mark.parametrize("goal, extra", [("remove-brokers", {"brokers": [1]}),
                                         ("replication-factor", {"replication_factor": 3, "topics": ["logs"]})])
def test_plan_summary_counts_local_bytes_and_reports_remote_bytes_not_copied(goal, extra):
    snap = _tiered_snapshot()
    result = plan(snap, goal, engine="local", throttle_bytes_per_sec=10 * MB, **extra)
    s = result.summary
    tiered_moved = {m.partition for m in result.plan.moves if m.topic == "logs"}
    assert tiered_moved, result.plan.moves
    assert s["data_to_move_bytes"] == 2 * MB * s["replica_movements"]  # every partition's local 2 MB
    assert s["remote_bytes_not_copied"] == 300 * MB * len(tiered_moved)
    # the disks hold local bytes only: the brokers' totals add up to the local logs
    assert sum(r["bytes_before"] for r in s["brokers"]) == 4 * 2 * 2 * MB
