"""`kafka-reassign plan`: snapshot + goal -> plan file, summary file, chart, one JSON line.

Writes, next to ``--out PLAN.json``: ``PLAN.summary.json`` and ``PLAN.chart.png``. Prints the
summary as one JSON line on stdout (the DAG's logs and scripts read it). Exit codes: 0 done,
2 bad input (snapshot, goal, options, assignor), 1 anything else.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from kafka_reassign import defaults as D
from kafka_reassign.cli.parser import broker_id_list as _ids, name_list as _names

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def summary_path_for(plan_path: str | os.PathLike[str]) -> Path:
    """``/x/PLAN.json`` -> ``/x/PLAN.summary.json``."""
    p = Path(plan_path)
    stem = p.name[:-5] if p.name.endswith(".json") else p.name
    return p.with_name(f"{stem}.summary.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `kafka-reassign plan` (shared with spark_job.py).

    :param parser: the subcommand's parser
    """
    from kafka_reassign.planning.spark import GOAL_NAMES

    parser.add_argument("--snapshot", required=True,
                        help="cluster snapshot: JSON (kafka-reassign snapshot) or snapshot lines "
                             "(header line + one partition per line; Spark reads it directly)")
    parser.add_argument("--goal", required=True, choices=list(GOAL_NAMES) + ["custom"],
                        help="what the plan should achieve ('custom' = only --assignor decides)")
    parser.add_argument("--out", required=True, help="plan file to write (Kafka reassignment JSON)")
    parser.add_argument("--brokers", type=_ids, default=None,
                        help="brokers to fill (add-brokers) or drain (remove-brokers), e.g. 4,5")
    parser.add_argument("--replication-factor", type=int, default=None,
                        help="target replication factor (replication-factor goal)")
    parser.add_argument("--topics", type=_names, default=None,
                        help="topics for the replication-factor goal (default: all)")
    parser.add_argument("--exclude-topics", type=_names, default=None, help="topics never touched")
    parser.add_argument("--exclude-brokers", type=_ids, default=None,
                        help="brokers that neither gain nor lose a replica")
    parser.add_argument("--capacity-ceiling", type=float, default=0.85,
                        help="max disk utilisation of a broker or log dir after the plan (default 0.85)")
    parser.add_argument("--balance-tolerance", type=float, default=0.04,
                        help="a broker may end this fraction above the mean utilisation (default 0.04)")
    D.add_movement_arguments(parser, purpose=" for the time estimate and warnings")
    parser.add_argument("--assignor", default=None,
                        help="dotted path of your ReplicaAssignor class (package.module.Class)")
    parser.add_argument("--engine", choices=["spark", "local"], default="spark",
                        help="spark (default) or local (plain Python aggregates, no JVM)")
    parser.add_argument("--spark-master", default=None,
                        help="Spark master URL (default $KAFKA_REASSIGN_SPARK_MASTER or local[2])")
    parser.add_argument("--timeout", type=float, default=None, dest="timeout_seconds",
                        help="cancel the planning Spark jobs after this many seconds (default 900)")
    parser.add_argument("--no-chart", action="store_true", help="do not write the PNG chart")
    parser.add_argument("--options", type=_json_object, default=None, dest="options_json",
                        help="more planner options as a JSON object of PlanOptions names, e.g. "
                             '\'{"count_tolerance": 0.1}\' (they win over the flags above)')


def options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Planner keyword options from parsed arguments."""
    names = ["brokers", "replication_factor", "topics", "exclude_topics", "exclude_brokers",
             "capacity_ceiling", "balance_tolerance", "throttle_bytes_per_sec",
             "log_dir_throttle_bytes_per_sec", "max_partition_movements", "max_movements_per_broker",
             "max_leader_movements", "disk_threshold_percent", "consumer_fanout", "assignor", "engine",
             "broker_network_capacity_bytes_per_sec", "broker_network_capacities", "max_replicas_per_broker",
             "spark_master", "timeout_seconds"]
    out = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    if getattr(args, "balance_goals", None):  # the flag repeats; without it the default list
        out["balance_goals"] = args.balance_goals
    out.update(getattr(args, "options_json", None) or {})
    return out


class _InputError(Exception):
    """The snapshot file cannot be read."""


def _plan(args: argparse.Namespace, spark: Any) -> Any:
    """Plan from the snapshot file: snapshot lines go to Spark as a file, JSON is decoded here."""
    from kafka_reassign.planning.spark import plan, plan_file
    from kafka_reassign.planning.spark.snapshot_file import is_snapshot_lines

    if is_snapshot_lines(args.snapshot):
        return plan_file(args.snapshot, args.goal, spark=spark, **options_from_args(args))
    try:
        snapshot = json.loads(Path(args.snapshot).read_text(encoding="utf-8"))
    except OSError as exc:
        raise _InputError(f"cannot read snapshot {args.snapshot}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise _InputError(f"snapshot {args.snapshot} is not valid JSON: {exc}") from None
    return plan(snapshot, args.goal, spark=spark, **options_from_args(args))


def run(args: argparse.Namespace, spark: Any = None) -> int:
    """Plan, write plan + summary (+ chart), print the summary line.

    :param args: parsed arguments (see :func:`add_arguments`)
    :param spark: an existing SparkSession (spark_job passes the submitted one)
    """
    from kafka_reassign.errors import ProblemListError
    from kafka_reassign.planning.spark import AssignorError, PlannerError
    from kafka_reassign.planning.spark.chart import chart_path_for, write_chart

    out = Path(args.out)
    if not out.parent.exists():
        print(f"kafka-reassign plan: error: directory {out.parent} does not exist", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        result = _plan(args, spark)
    except (ProblemListError, AssignorError, _InputError) as exc:
        print(f"kafka-reassign plan: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PlannerError as exc:  # too large for the settings, or past the deadline
        print(f"kafka-reassign plan: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    # everything validated and computed: now write (plan last-but-one, atomically)
    summary = dict(result.summary)
    summary["plan_file"] = str(out)
    if not getattr(args, "no_chart", False):
        try:
            summary["chart_file"] = str(write_chart(summary, chart_path_for(out)))
        except Exception as exc:  # a chart is a nice-to-have; never lose the plan for it
            summary.setdefault("warnings", []).append(f"chart not written: {exc}")
    spath = summary_path_for(out)
    summary["summary_file"] = str(spath)
    tmp = spath.with_name(f".{spath.name}.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, spath)
    result.plan.dump(out)
    print(json.dumps(summary, separators=(",", ":")), flush=True)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-reassign plan",
                                     description="Compute a reassignment plan on Spark.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
