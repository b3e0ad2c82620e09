"""The demo's closing report: what moved, bytes per broker, timing against the throttle bounds, configs restored."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_reassign.planning.bounds import Bound, UniformLimits, partition_copy, source_free_bound, throttle_bound
from kafka_reassign.units import fmt_bytes, format_duration, format_rate
from kafka_reassign_demo.scenario import broker_bytes

if TYPE_CHECKING:
    from kafka_reassign.execution.progress import ProgressView

#: (the run's last ProgressView or None, prepare's estimated seconds or None)
RunTiming = tuple["ProgressView | None", "float | None"]


def configs_of(cluster: Any) -> dict[str, dict[str, str]]:
    """Every broker's and topic's dynamic configs, keyed ``broker 1`` / ``topic orders``."""
    snap = cluster.snapshot()
    out = {f"broker {b['id']}": dict(cluster.broker_configs(b["id"])) for b in snap["brokers"]}
    out.update({f"topic {t['name']}": dict(cluster.topic_configs(t["name"])) for t in snap["topics"]})
    return out


def throttle_bounds(before: dict[str, Any], after: dict[str, Any], throttle: float) -> tuple[Bound, Bound]:
    """(fixed-leader, source-free) bounds of the moves between two snapshots under a KIP-73 throttle.

    Each partition is one copy from its replicas before to its replicas after; the fixed-leader
    bound sends it from the leader before the run, the source-free one from any in-sync replica
    (:mod:`kafka_reassign.planning.bounds`).

    :param before: snapshot before the run
    :param after: snapshot after it
    :param throttle: replication throttle, bytes/s
    """
    old = {(t["name"], p["partition"]): p for t in before["topics"] for p in t["partitions"]}
    copies = []
    for t in after["topics"]:
        for p in t["partitions"]:
            prev = old[(t["name"], p["partition"])]
            copies.append(partition_copy(prev["replicas"], p["replicas"], int(prev.get("size_bytes", 0)),
                                         prev["leader"], prev.get("isr")))
    limits = UniformLimits(throttle)
    return throttle_bound(copies, limits), source_free_bound(copies, limits)


def moved_partitions(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, list[int], list[int], int]]:
    """(name, replicas before, replicas after, size) of every partition whose replicas changed."""
    old = {(t["name"], p["partition"]): p["replicas"] for t in before["topics"] for p in t["partitions"]}
    return [(f"{t['name']}-{p['partition']}", old[(t["name"], p["partition"])], p["replicas"],
             int(p.get("size_bytes", 0)))
            for t in after["topics"] for p in t["partitions"] if old[(t["name"], p["partition"])] != p["replicas"]]


def _timing(before: dict[str, Any], after: dict[str, Any], wall: float, final: RunTiming, throttle: float,
            scale: float, real: bool = False) -> str:
    """Wall and simulated time of the moves against the least time the throttle allows and the estimate.

    :param final: (the run's last ProgressView or None, prepare's estimated seconds or None)
    """
    view, estimate = final
    fixed, free = throttle_bounds(before, after, throttle)
    bound = fixed.seconds
    out = f"\nTime: {format_duration(wall)} wall for the whole DAG run (snapshot, planning, checks included)."
    if view is not None and view.first_submit_at and view.updated_at:
        moving = max(0.0, view.updated_at - view.first_submit_at) * scale
        clock = "on the real cluster" if real else "simulated"
        out += (f"\nMoves: {format_duration(moving)} on the real cluster, from the first submission to the last step done."
                if real else
                f"\nMoves: {format_duration(moving / scale)} wall = {format_duration(moving)} simulated (x{scale:g}), "
                f"from the first submission to the last step done.")
        if bound:
            out += (f"\nThe throttle bound ({format_rate(throttle)} per broker; copies sent by the leaders before the run: "
                    f"the busiest broker's bytes / throttle) "
                    f"is {format_duration(bound)} {clock}: the run took {moving / bound:.2f}x that bound.")
            if free.seconds:
                out += (f"\nThe source-free bound (any in-sync replica may send a copy) is "
                        f"{format_duration(free.seconds)} {clock}: {moving / free.seconds:.2f}x.")
        if estimate:
            out += (f"\nEstimated before the run (prepare): {format_duration(estimate)}; "
                    f"the moves took {format_duration(moving)}, {(moving - estimate) / estimate:+.0%} against it.")
    return out


def report(cluster: Any, dr: Any, before: dict[str, Any], before_cfg: dict[str, dict[str, str]], *,
            wall: float, final: RunTiming, args: argparse.Namespace, home: Path) -> int:
    """Print what the run did and whether every throttle config is back; returns the exit code.

    :param dr: the DAG run dag.test returned
    :param before_cfg: :func:`configs_of` before the run
    :param final: (the run's last ProgressView or None, prepare's estimated seconds or None)
    """
    after, after_cfg = cluster.snapshot(), configs_of(cluster)
    state = str(getattr(dr.state, "value", dr.state))
    moved = moved_partitions(before, after)
    print("\n" + "=" * 78)
    print(f"Run {dr.run_id}: {state.upper()}")
    print(f"\nWhat moved ({len(moved)} partition(s), {fmt_bytes(sum(m[3] for m in moved))} of partitions):")
    for name, old, new, size in moved:
        print(f"  {name:<22} {str(old):<12} -> {str(new):<12} {fmt_bytes(size)}")
    lb, la = broker_bytes(before), broker_bytes(after)
    print("\nBytes per broker (before -> after):")
    for b in sorted(lb):
        print(f"  broker {b}: {fmt_bytes(lb[b]):>10} -> {fmt_bytes(la[b]):>10}")
    print(_timing(before, after, wall, final, args.throttle, args.time_scale, real=args.real_kafka))
    same = True
    print("\nDynamic configs, before the run -> after it:")
    for res in sorted(set(before_cfg) | set(after_cfg)):
        was, now = before_cfg.get(res, {}), after_cfg.get(res, {})
        if was or now:
            same = same and now == was
            print(f"  {res}: {was} -> {now}{'' if now == was else '   <-- DIFFERENT'}")
    print("Throttles back to their prior values (the operator's own included): " + ("YES" if same else "NO"))
    print(f"\nSee this run in the Airflow UI: AIRFLOW_HOME={home} {Path(sys.executable).parent / 'airflow'} "
          "api-server --port 8080")
    print("  then open http://localhost:8080/dags/kafka_reassign: the run's grid, and in the execute task's log "
          "the progress table of every poll.")
    print("  The live progress page (http://localhost:8080/kafka-reassign/) needs the cluster, which stopped "
          "with the demo: see it in the compose stack (README).")
    print("=" * 78)
    return 0 if state == "success" and same else 1
