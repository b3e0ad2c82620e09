"""The plan section of the progress page: the planner's summary in units people read."""
from __future__ import annotations

import json

from kafka_reassign_airflow.plan_view import load_plan_view, plan_summary_view, planned_files

SUMMARY = {"goal": "remove-brokers", "partitions_moved": 12, "replica_movements": 14, "log_dir_movements": 1,
           "data_to_move_bytes": 3_500_000_000, "moved_over_lower_bound": 1.04, "leader_movements": 5,
           "balance_before": 1.31, "balance_after": 1.02, "estimated_seconds": 754.0,
           "warnings": ["broker 7 is drained"],
           "brokers": [{"broker": 7, "rack": "a", "util_before": 0.5, "util_after": 0.0, "bytes_before": 5e9,
                        "bytes_after": 0, "replicas_before": 40, "replicas_after": 0, "leaders_before": 13,
                        "leaders_after": 0}]}


def test_headline_and_broker_rows_read_like_an_operator_writes():
    view = plan_summary_view(SUMMARY)
    rows = {h["label"]: h["value"] for h in view["headline"]}
    assert rows["Data to copy"] == "3.5 GB (1.04 × the least any plan could move to reach the accepted balance)"
    assert rows["Disk balance (max / mean)"] == "1.310 → 1.020"
    assert rows["Estimated time"] == "12m34s"  # units.format_duration
    assert "Batches" not in rows, "no batch exists since the sliding window"
    assert rows["Replica movements"] == "14 between brokers, 1 between disks"
    assert view["brokers"] == [{"broker": 7, "rack": "a", "disk_before": "50.0 %", "disk_after": "0.0 %",
                                "data_before": "5.0 GB", "data_after": "0 B", "replicas": "40 → 0",
                                "leaders": "13 → 0", "change": -50.0}]
    assert view["warnings"] == ["broker 7 is drained"]
    never = dict((h["label"], h["value"]) for h in plan_summary_view({**SUMMARY, "estimated_seconds": None})["headline"])
    assert never["Estimated time"].startswith("never finishes")


def test_data_to_copy_says_when_the_lower_bound_does_not_apply():
    def copy_row(**changes: object) -> str:
        rows = {h["label"]: h["value"] for h in plan_summary_view({**SUMMARY, **changes})["headline"]}
        return rows["Data to copy"]

    short = copy_row(moved_over_lower_bound=None, reaches_accepted_balance=False, lower_bound_bytes=9_000_000_000)
    assert short == "3.5 GB (the accepted balance is out of reach: see the warnings)"
    within = copy_row(moved_over_lower_bound=None, reaches_accepted_balance=True, lower_bound_bytes=0)
    assert within == "3.5 GB (the disks were already within the balance tolerance)"
    assert copy_row(moved_over_lower_bound=None) == "3.5 GB"  # a user assignor: no bound


def test_files_come_from_the_plan_tasks_xcom(tmp_path):
    summary = tmp_path / "PLAN.summary.json"
    summary.write_text(json.dumps(SUMMARY))
    chart = tmp_path / "PLAN.chart.png"
    xcoms = [[{"index": 0}], {"work_dir": str(tmp_path), "plan_file": str(tmp_path / "PLAN.json"),
                             "summary_file": str(summary), "chart_file": str(chart)}]
    files = planned_files(xcoms)
    assert files["summary_file"] == str(summary)
    assert load_plan_view(files)["chart"] is False  # no PNG written: no chart shown
    chart.write_bytes(b"\x89PNG\r\n\x1a\n")
    assert load_plan_view(files)["chart"] is True
    assert planned_files([{"batches": []}]) is None and load_plan_view(None) is None
