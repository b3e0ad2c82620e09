"""The ``kafka-reassign`` command line: one parser per subcommand.

The run flags (throttle, movement limits, timeouts, switches) come from the run parameters'
table (:func:`kafka_reassign.defaults.add_run_arguments`); ``validate`` and ``rehearse`` take
the same ones as ``execute`` (not dry-run, cancel-on-failure or rehearse: they never write), so
they check what ``execute`` would run. ``args.command`` names the subcommand.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from kafka_reassign import defaults as D
from kafka_reassign.units import rate_argument

DEFAULT_RECORD_DIR = os.environ.get("KAFKA_REASSIGN_RECORD_DIR") or str(
    Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "kafka-reassign" / "records")

_PLAN_HELP = "reassignment JSON ('-' = stdin)"


def positive_float(text: str) -> float:
    """An argparse ``type=`` for a number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def broker_id_list(text: str) -> list[int]:
    """An argparse ``type=`` for comma-separated broker ids."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated broker ids, got {text!r}") from None


def name_list(text: str) -> list[str]:
    """An argparse ``type=`` for a comma-separated list of names (topics, log dirs)."""
    return [x.strip() for x in text.split(",") if x.strip()]


def _add_conn(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--bootstrap-server", required=required, metavar="HOST:PORT[,...]",
                   help="Kafka brokers to connect to")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties (security.protocol, sasl.*, ssl.*) as for kafka-*.sh")
    p.add_argument("--connect-timeout", type=positive_float, default=D.CONNECT_TIMEOUT_SECONDS, metavar="SECONDS",
                   help=f"give up reaching the cluster after this long (default {D.CONNECT_TIMEOUT_SECONDS:g})")


def _add_record_dir(p: argparse.ArgumentParser, help_text: str) -> None:
    p.add_argument("--record-dir", default=DEFAULT_RECORD_DIR, help=f"{help_text} (default {DEFAULT_RECORD_DIR})")


def _add_snapshot(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help="write the cluster's placement, sizes and configs as a snapshot")
    _add_conn(p)
    p.add_argument("--out", required=True, help="snapshot file ('-' = stdout)")
    p.add_argument("--sample-seconds", type=float, default=0.0,
                   help="estimate produce rates from log growth over this many seconds (default 0: skip)")
    D.add_run_arguments(p, ("log_dir_capacity_bytes",))


def _add_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="compute a plan on Spark (see its --help)")
    try:
        from kafka_reassign.planning.spark import command as planner_cli
        planner_cli.add_arguments(p)
    except ImportError:
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a plan against the cluster (or a snapshot); writes nothing")
    _add_conn(p, required=False)
    p.add_argument("--plan", required=True, help=_PLAN_HELP)
    p.add_argument("--snapshot", help="validate against this snapshot instead of a live cluster")
    D.add_run_arguments(p, execute=False)
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)


def _add_execute(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("execute", help="run a plan: throttle, a window of moves in flight, restore the throttle")
    _add_conn(p)
    p.add_argument("--plan", required=True, help=_PLAN_HELP)
    D.add_run_arguments(p)
    p.add_argument("--print-interval", type=float, default=30.0, help="seconds between progress tables")
    _add_record_dir(p, "throttle records")
    p.add_argument("--run-id", help="run id (default: generated); re-use one to resume a run (its execution state "
                                    "is saved in --record-dir after every poll)")
    p.add_argument("--snapshot", help="snapshot with bytes_in_per_sec (snapshot --sample-seconds) for time "
                                      "estimates and throttle-below-produce-rate warnings")
    p.add_argument("--json", action="store_true", help="JSON lines instead of tables")


def _add_rehearse(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rehearse", help="run a plan on a simulated copy of the cluster (or a snapshot) and "
                                        "report its moving time and risks; writes nothing to the cluster")
    _add_conn(p, required=False)
    p.add_argument("--plan", required=True, help=_PLAN_HELP)
    p.add_argument("--snapshot", help="rehearse on this snapshot (offline) instead of reading the live cluster")
    p.add_argument("--sample-seconds", type=float, default=5.0,
                   help="live cluster: measure produce rates over this many seconds (default 5)")
    p.add_argument("--network-bytes-per-sec", type=rate_argument, default=None, metavar="RATE",
                   help="broker network capacity where the snapshot does not say (default 1 Gbit/s)")
    p.add_argument("--out", help="also write the report as JSON to this file")
    D.add_run_arguments(p, execute=False)
    p.add_argument("--json", action="store_true", help="the report as JSON")


def _add_run_commands(sub: argparse._SubParsersAction) -> None:
    """status, restore and cancel: they act on a run through its --record-dir."""
    p = sub.add_parser("status", help="progress of a running execute (or every reassignment in flight) and throttles")
    _add_conn(p)
    _add_record_dir(p, "the execute's --record-dir")
    p.add_argument("--run-id", help="the run to show (default: the running execute, else every move in flight)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("restore", help="restore throttle configs recorded by earlier runs")
    _add_conn(p)
    _add_record_dir(p, "where the throttle records are")
    p.add_argument("--run-id", help="only this run (default: every unrestored record)")

    p = sub.add_parser("cancel", help="stop a running execute: revert its in-flight moves, restore the throttle")
    _add_conn(p, required=False)
    _add_record_dir(p, "the execute's --record-dir")
    p.add_argument("--run-id", help="the run to cancel (default: the one running execute)")
    p.add_argument("--wait", type=positive_float, default=300.0, metavar="SECONDS",
                   help="how long to wait for the execute to revert and restore (default 300)")

    for name, what in (("pause", "hold back a running execute's new moves (those in flight finish)"),
                       ("resume", "let a paused execute start new moves again")):
        p = sub.add_parser(name, help=what)
        _add_record_dir(p, "the execute's --record-dir")
        p.add_argument("--run-id", required=True, help=f"the run to {name}")


def _add_cordon_commands(sub: argparse._SubParsersAction) -> None:
    """cordon and uncordon (KIP-1066, Kafka 4.3+): recorded like a throttle in --record-dir."""
    p = sub.add_parser("cordon", help="stop Kafka placing new replicas on brokers' log dirs (cordoned.log.dirs); "
                                      "the prior value is recorded first")
    _add_conn(p)
    p.add_argument("--brokers", type=broker_id_list, required=True, metavar="ID[,ID...]", help="brokers to cordon")
    p.add_argument("--log-dirs", type=name_list, metavar="DIR[,DIR...]",
                   help="only these log dirs of each broker (default: all of them, '*')")
    p.add_argument("--allow-sole-isr", action="store_true",
                   help="cordon even brokers holding the only in-sync replicas of some partitions")
    _add_record_dir(p, "where the prior values are recorded (uncordon reads them)")
    p = sub.add_parser("uncordon", help="put back the cordoned.log.dirs each broker had before `cordon`")
    _add_conn(p)
    p.add_argument("--brokers", type=broker_id_list, required=True, metavar="ID[,ID...]", help="brokers to uncordon")
    _add_record_dir(p, "where `cordon` recorded the prior values")


def build_parser() -> argparse.ArgumentParser:
    """The ``kafka-reassign`` parser; ``args.command`` is the subcommand's name."""
    parser = argparse.ArgumentParser(prog="kafka-reassign", description=(
        "Safe Kafka partition reassignment: a window of KIP-435 incremental moves under a KIP-73 "
        "throttle that is always restored."))
    parser.add_argument("-v", "--verbose", action="store_true", help="log Kafka calls")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in (_add_snapshot, _add_plan, _add_validate, _add_execute, _add_rehearse, _add_run_commands,
                _add_cordon_commands):
        add(sub)
    return parser
