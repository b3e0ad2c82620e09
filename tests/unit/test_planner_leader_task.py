"""One leader task (planning/spark/leaders.py ``choose_leaders``) fed the way Spark's Arrow
batches arrive (numpy arrays, nulls as None or NaN) and the way the local engine feeds it (lists):
the same changed rows either way, nulls read as rate 0, leader -1, remote 0."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kafka_reassign.planning.spark.leaders import CHANGE_COLUMNS, LeaderInputs, choose_leaders, row_problem

RACK = {b: f"r{b % 3}" for b in range(6)}


def _frame(arrays: bool, dst: int = 2) -> pd.DataFrame:
    """Four partitions on brokers 0-5; partition 1 moves its position 2 from broker 5 to ``dst``."""
    reps = [[0, 1, 2], [0, 4, 5], [0, 1, 5], [3, 4, 5]]
    moves: list = [None, [2], None, None]
    dsts: list = [None, [dst], None, None]
    if arrays:  # Arrow gives int32 numpy arrays for array<int> columns
        reps = [np.array(r, dtype=np.int32) for r in reps]
        moves = [None if m is None else np.array(m, dtype=np.int32) for m in moves]
        dsts = [None if d is None else np.array(d, dtype=np.int32) for d in dsts]
    return pd.DataFrame({"lgrp": 0, "topic": ["t"] * 4, "partition": [3, 1, 2, 0], "replicas": reps,
                         "mpos": moves, "mdst": dsts, "size_bytes": [10.0, 20.0, 30.0, 40.0],
                         "bytes_in_per_sec": [1.0, float("nan"), None, 4.0],
                         "leader": [0, None, 0, 3], "remote_bytes": [None, 5.0, float("nan"), 0.0]})


def _inputs() -> LeaderInputs:
    return LeaderInputs(eligible=set(range(6)), fixed=set(), rack=RACK, placeable=set(range(6)))


def test_arrow_arrays_and_lists_give_the_same_changed_rows() -> None:
    from_arrays = choose_leaders(_frame(True), _inputs())
    from_lists = choose_leaders(_frame(False), _inputs())
    assert list(from_arrays.columns) == list(CHANGE_COLUMNS)
    assert from_arrays.to_dict("records") == from_lists.to_dict("records")
    by_part = {r["partition"]: r for r in from_arrays.to_dict("records")}
    # broker 0 led three of four partitions: the quota hands two of them on
    assert sorted(by_part) == [1, 2, 3]
    moved = by_part[1]
    assert sorted(moved["final"]) == [0, 2, 4] and moved["added"] == [2] and moved["removed"] == [5]
    assert moved["problem"] is None
    # nulls: no rate -> 0, no leader -> -1, no remote bytes -> 0
    assert (moved["bytes_in_per_sec"], moved["leader"], moved["remote_bytes"]) == (0.0, -1, 5.0)
    assert (by_part[2]["bytes_in_per_sec"], by_part[2]["remote_bytes"]) == (0.0, 0.0)
    assert by_part[3]["bytes_in_per_sec"] == 1.0 and by_part[3]["leader"] == 0
    for r in from_arrays.to_dict("records"):
        assert all(isinstance(b, int) for b in r["final"]) and not math.isnan(r["size_bytes"])
        assert sorted(r["final"]) == sorted(r["orig"]) or r["partition"] == 1


def test_move_that_would_lose_a_rack_is_dropped() -> None:
    out = choose_leaders(_frame(True, dst=3), _inputs())  # broker 3 shares rack r0 with broker 0
    assert all(sorted(r["final"]) == sorted(r["orig"]) for r in out.to_dict("records"))


def test_row_problem_passes_reorders_and_names_each_broken_rule() -> None:
    inp = LeaderInputs(eligible=set(range(6)), fixed={4}, rack=RACK, placeable={0, 1, 2, 3, 5})
    assert row_problem([0, 1, 2], [2, 0, 1], inp) is None  # a new leader only
    assert "repeat a broker" in (row_problem([0, 0, 2], [2, 0, 0], inp) or "")
    assert "replication factor" in (row_problem([0, 1, 2], [0, 1], inp) or "")
    assert "not placeable" in (row_problem([0, 1, 2], [0, 1, 4], inp) or "")
    assert "fewer racks" in (row_problem([0, 1, 2], [0, 1, 3], inp) or "")
    assert "excluded broker" in (row_problem([0, 1, 4], [0, 1, 5], inp) or "")
