"""Produce rates are read on a grid (planning/spark/data.py RATE_STEPS) so that a broker's totals
are exact sums: the order the engine adds replicas in (Spark's is its own) changes nothing."""
from __future__ import annotations

import random
from pathlib import Path

from kafka_reassign.planning.spark.data import RATE_STEPS, LocalData
from kafka_reassign.planning.spark.loads import Loads, broker_infos, loads_from_frame
from kafka_reassign.planning.spark.snapshot_file import header_of, partition_lines, write_lines
from test_planner_goals import gen


def _loads(snap: dict, rows: list[dict], path: Path) -> Loads:
    header = header_of(snap)
    write_lines(path, header, rows)
    per, _, problems = LocalData(str(path), header).loads()
    assert not problems
    return loads_from_frame(per, broker_infos(header)[1])


def test_broker_totals_do_not_depend_on_the_order_replicas_are_added(tmp_path: Path) -> None:
    snap = gen(brokers=12, racks=3, topics=40, partitions=30, skew=1.0, seed=3)
    rng = random.Random(5)
    for t in snap["topics"]:
        for p in t["partitions"]:
            p["bytes_in_per_sec"] = rng.random() * 1e6 / 3  # no short binary fraction
            p["consumer_bytes_per_sec"] = rng.random() * 2e6 / 7
    rows = list(partition_lines(snap))
    first = _loads(snap, rows, tmp_path / "a.jsonl")
    for seed in range(4):
        random.Random(seed).shuffle(rows)
        again = _loads(snap, rows, tmp_path / f"b{seed}.jsonl")
        assert again.net_in == first.net_in  # bit for bit, not approx
        assert again.bytes_in == first.bytes_in
        assert again.rep_out == first.rep_out and again.consumed == first.consumed
    # the grid is far below anything a plan or a summary shows
    assert all(abs(v * RATE_STEPS - round(v * RATE_STEPS)) == 0 for v in first.net_in.values())
