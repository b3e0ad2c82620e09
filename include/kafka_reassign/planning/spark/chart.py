"""PNG chart of per-broker disk utilisation (and replica / leader counts) before and after a plan."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafka_reassign.units import fmt_bytes


def chart_path_for(plan_path: str | os.PathLike[str]) -> Path:
    """``/x/PLAN.json`` -> ``/x/PLAN.chart.png`` (written beside the plan)."""
    p = Path(plan_path)
    stem = p.name[:-5] if p.name.endswith(".json") else p.name
    return p.with_name(f"{stem}.chart.png")


def write_chart(summary: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Draw before/after bars per broker; returns the written path.

    :param summary: a planner summary (needs ``brokers`` rows)
    :param path: PNG file to write
    """
    import matplotlib

    matplotlib.use("Agg")  # no display on workers
    import matplotlib.pyplot as plt

    rows = summary.get("brokers") or []
    ids = [str(r["broker"]) for r in rows]
    x = list(range(len(rows)))
    width = 0.4
    fig_w = min(24.0, max(8.0, 0.12 * len(rows) + 4))
    fig, axes = plt.subplots(3, 1, figsize=(fig_w, 9), sharex=True)
    series = [("util", "disk utilisation", 100.0, "%"), ("replicas", "replicas", 1.0, ""),
              ("leaders", "preferred leaders", 1.0, "")]
    for ax, (key, label, scale, unit) in zip(axes, series):
        before = [r[f"{key}_before"] * scale for r in rows]
        after = [r[f"{key}_after"] * scale for r in rows]
        ax.bar([i - width / 2 for i in x], before, width, label="before", color="#c8c8c8")
        ax.bar([i + width / 2 for i in x], after, width, label="after", color="#2b6cb0")
        if rows:
            mean_after = sum(after) / len(after)
            ax.axhline(mean_after, color="#c05621", linewidth=0.8, linestyle="--")
        ax.set_ylabel(f"{label}{' (' + unit + ')' if unit else ''}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="upper right")
    step = max(1, len(rows) // 40)
    axes[-1].set_xticks(x[::step])
    axes[-1].set_xticklabels(ids[::step], rotation=90 if len(rows) > 20 else 0, fontsize=7)
    axes[-1].set_xlabel("broker")
    title = (f"{summary.get('goal')}: balance {summary.get('balance_before')} -> "
             f"{summary.get('balance_after')} (max/mean utilisation), "
             f"{summary.get('replica_movements')} replica moves, "
             f"{fmt_bytes(summary.get('data_to_move_bytes') or 0)}"
             + (f" (+{fmt_bytes(summary['remote_bytes_not_copied'])} remote, not copied)"
                if summary.get("remote_bytes_not_copied") else ""))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
