"""The planner's summary as the progress page shows it: a headline table and one row per broker.

No Airflow here: it turns ``PLAN.summary.json`` (kafka_reassign.planning.spark) into rows with units
people read (GB, %, "12 min"), and finds a run's plan files among its XCom values.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from kafka_reassign.units import fmt_bytes, format_duration


def planned_files(xcom_values: Iterable[Any]) -> dict[str, str] | None:
    """The plan task's ``{"plan_file", "summary_file", "chart_file"}`` among a run's XCom values."""
    for value in xcom_values:
        if isinstance(value, dict) and value.get("summary_file") and value.get("plan_file"):
            return {k: value.get(k) for k in ("plan_file", "summary_file", "chart_file")}
    return None


def _pct(u: Any) -> str:
    return "–" if u is None else f"{100.0 * float(u):.1f} %"


def _ratio(a: Any, b: Any) -> str:
    return "–" if a is None or b is None else f"{float(a):.3f} → {float(b):.3f}"


def _data_to_copy(summary: Mapping[str, Any]) -> str:
    """The bytes to copy, against the planner's lower bound (the least any plan copies to reach
    the balance the goal accepts) when that bound applies."""
    text = fmt_bytes(summary.get("data_to_move_bytes") or 0)
    ratio = summary.get("moved_over_lower_bound")
    if ratio is not None:
        return f"{text} ({float(ratio):.2f} × the least any plan could move to reach the accepted balance)"
    if summary.get("reaches_accepted_balance") is False:
        return f"{text} (the accepted balance is out of reach: see the warnings)"
    if summary.get("lower_bound_bytes") == 0 and summary.get("data_to_move_bytes"):
        return f"{text} (the disks were already within the balance tolerance)"
    return text


def plan_summary_view(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Headline rows (label, value) and per-broker rows of a planner summary.

    :param summary: the decoded ``PLAN.summary.json``
    """
    seconds = summary.get("estimated_seconds")
    headline = [
        ("Goal", str(summary.get("goal") or "–")),
        ("Partitions moved", str(summary.get("partitions_moved", "–"))),
        ("Replica movements", f"{summary.get('replica_movements', '–')} between brokers, "
                              f"{summary.get('log_dir_movements', 0)} between disks"),
        ("Data to copy", _data_to_copy(summary)),
        *([("Remote data not copied", f"{fmt_bytes(summary['remote_bytes_not_copied'])} in remote storage "
                                      "(tiered topics): moves copy only the local log")]
          if summary.get("remote_bytes_not_copied") else []),
        ("Leader changes", str(summary.get("leader_movements", "–"))),
        ("Disk balance (max / mean)", _ratio(summary.get("balance_before"), summary.get("balance_after"))),
        ("Replica count balance", _ratio(summary.get("replica_count_balance_before"),
                                         summary.get("replica_count_balance_after"))),
        ("Leader balance", _ratio(summary.get("leader_balance_before"), summary.get("leader_balance_after"))),
        ("Estimated time", "never finishes at this throttle (see warnings)" if seconds is None
         else format_duration(float(seconds))),
    ]
    brokers = [{
        "broker": r.get("broker"), "rack": r.get("rack"),
        "disk_before": _pct(r.get("util_before")), "disk_after": _pct(r.get("util_after")),
        "data_before": fmt_bytes(r.get("bytes_before") or 0), "data_after": fmt_bytes(r.get("bytes_after") or 0),
        "replicas": f"{r.get('replicas_before', 0)} → {r.get('replicas_after', 0)}",
        "leaders": f"{r.get('leaders_before', 0)} → {r.get('leaders_after', 0)}",
        "change": round(100.0 * (float(r.get("util_after") or 0) - float(r.get("util_before") or 0)), 1),
    } for r in summary.get("brokers") or []]
    return {"headline": [{"label": k, "value": v} for k, v in headline], "brokers": brokers,
            "warnings": [str(w) for w in summary.get("warnings") or []]}


def load_plan_view(files: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The page's plan section from the plan task's files (None when the run planned nothing)."""
    if not files or not files.get("summary_file"):
        return None
    try:
        summary = json.loads(Path(files["summary_file"]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"headline": [], "brokers": [], "warnings": [f"cannot read the plan summary: {exc}"],
                "chart": False}
    view = plan_summary_view(summary)
    chart = files.get("chart_file")
    view["chart"] = bool(chart and Path(chart).is_file())
    return view
