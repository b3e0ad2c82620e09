"""``kafka-reassign pause`` and ``resume``: hold back a running execute's new moves, and let them go.

A pause is a file in the run's ``--record-dir`` (:class:`~kafka_reassign.execution.control.RunControl`)
that the execute reads before each poll: while it exists no new step starts, and the steps in
flight finish and are watched as ever (the same as outside a maintenance window). It outlives
a restarted execute; ``resume`` removes it, and the next poll starts new steps again.
"""
from __future__ import annotations

import argparse

from kafka_reassign.cli.connection import BadInput
from kafka_reassign.execution.control import RunControl

EXIT_OK = 0


def _known_run(args: argparse.Namespace) -> RunControl:
    """The record directory's control, after checking it has an execute of ``--run-id`` registered."""
    control = RunControl(args.record_dir)
    if not control.is_registered(args.run_id):
        running = ", ".join(e["run_id"] for e in control.running()) or "none"
        raise BadInput(f"no running execute {args.run_id} in {args.record_dir} (running: {running})")
    return control


def cmd_pause(args: argparse.Namespace) -> int:
    _known_run(args).request_pause(args.run_id)
    print(f"run {args.run_id} paused: no new move starts, those in flight finish "
          f"(kafka-reassign resume --run-id {args.run_id} to go on)")
    return EXIT_OK


def cmd_resume(args: argparse.Namespace) -> int:
    was = _known_run(args).resume(args.run_id)
    print(f"run {args.run_id} resumed: new moves start at its next poll" if was
          else f"run {args.run_id} was not paused")
    return EXIT_OK
