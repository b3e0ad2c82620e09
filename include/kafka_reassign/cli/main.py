"""``kafka-reassign``: snapshot, plan, validate, execute, status, cancel, pause, resume, restore, cordon and uncordon.

Exit codes: 0 success, 1 the run failed (Kafka error, stall, timeout; throttles were
restored), 2 bad input or an unreachable cluster (arguments, plan, snapshot, parameters,
address; nothing was written), 130 interrupted or cancelled (in-flight moves reverted,
throttles restored).
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from kafka_reassign import defaults as D
from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.errors import KafkaAdminError, ProblemListError, ReassignError
from kafka_reassign.execution.control import CancelRequested
from kafka_reassign.execution.ownership import SubmittedTargets
from kafka_reassign.cli.connection import BadInput, admin_from_args as _admin
from kafka_reassign.cli.connection import properties_to_admin_kwargs  # noqa: F401 (public, tested)
from kafka_reassign.cli.cordon import cmd_cordon, cmd_uncordon, print_restore
from kafka_reassign.cli.pause import cmd_pause, cmd_resume
from kafka_reassign.cli.parser import build_parser

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def _err(msg: str) -> None:
    print(f"kafka-reassign: error: {msg}", file=sys.stderr)


def _load_plan(path: str):
    from kafka_reassign.planning.plan import ReassignmentPlan
    return ReassignmentPlan.from_json(_raw_plan(path)[0])


def _raw_plan(path: str) -> tuple[Any, Any]:
    """The plan file decoded but not parsed, so validation reports structure and cluster problems
    together; with the "current" part of a kafka-reassign-partitions --generate output (or None)."""
    from kafka_reassign.errors import PlanError, Problem
    from kafka_reassign.planning.plan import decode_plan_text
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(Problem(path, f"cannot read plan file: {exc.strerror or exc}", "unreadable")) from None
    return decode_plan_text(text, source="stdin" if path == "-" else path)


def _drift_warnings(current: Any, state: Any) -> list[str]:
    """Warnings when the cluster changed since kafka-reassign-partitions --generate printed ``current``."""
    from kafka_reassign.planning.plan import assignment_drift
    if current is None:
        return []
    drift = assignment_drift(current, state)
    if not drift:
        return []
    more = f" (and {len(drift) - 5} more)" if len(drift) > 5 else ""
    return [f"the cluster changed since the plan was generated: {'; '.join(drift[:5])}{more}"]


# -- subcommands --------------------------------------------------------------------------

def cmd_snapshot(args: argparse.Namespace) -> int:
    from kafka_reassign.cluster.cordons import cordon_support
    from kafka_reassign.cluster.capacities import parse_capacities
    from kafka_reassign.cluster.snapshot import read_cluster_snapshot, save_snapshot
    from kafka_reassign.units import fmt_bytes
    capacities = parse_capacities(args.log_dir_capacity_bytes, "--log-dir-capacity")
    with _admin(args) as admin:
        snap = read_cluster_snapshot(admin, sample_seconds=args.sample_seconds, capacities=capacities)
        support = cordon_support(admin)
    if support.supported is False:  # the snapshot cannot say which dirs are cordoned: none are
        print(f"kafka-reassign: note: {support.note}", file=sys.stderr)
    if args.out == "-":
        print(json.dumps(snap, indent=2))
    else:
        save_snapshot(snap, args.out)
        n = sum(len(t["partitions"]) for t in snap["topics"])
        remote = sum(p.get("remote_bytes", 0) for t in snap["topics"] for p in t["partitions"])
        tiered = f"; {fmt_bytes(remote)} in remote storage (tiered topics: moves do not copy it)" if remote else ""
        print(f"wrote {args.out}: {len(snap['brokers'])} brokers, {len(snap['topics'])} topics, {n} partitions{tiered}")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    """The plan against the cluster (or a snapshot), then the pre-flight stall check; writes nothing."""
    from kafka_reassign.rehearsal.rehearse import rehearse_live
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.planning.validate import validate_params
    params = validate_params(D.run_values_from_args(args))
    raw, current = _raw_plan(args.plan)
    if args.snapshot:
        from kafka_reassign.planning.preflight import SnapshotView
        from kafka_reassign.cluster.snapshot import load_snapshot
        from kafka_reassign.cluster.state import rates_from_snapshot
        snap = load_snapshot(args.snapshot)
        view = SnapshotView(snap)
        prepared = prepare(view, raw, params, produce_rates=rates_from_snapshot(snap), rehearser=rehearse_live)
        state = view.cluster_state()
    else:
        if not args.bootstrap_server and not args.command_config:
            raise BadInput("give --bootstrap-server (live cluster) or --snapshot FILE")
        with _admin(args) as admin:
            state = admin.cluster_state()
            prepared = prepare(admin, raw, params, state=state, rehearser=rehearse_live)
    warnings = _drift_warnings(current, state) + prepared.warnings
    n = len(raw.get("partitions", [])) if isinstance(raw, dict) else 0
    print(f"plan OK: {n} partition(s) valid against the cluster")
    if prepared.preflight:
        print(f"pre-flight OK: no move stalls at this throttle ({prepared.preflight.get('rates')})")
    if prepared.estimate:
        from kafka_reassign.planning.estimate import Estimate
        print(Estimate.from_json(prepared.estimate).describe())
    for w in warnings:
        print(f"warning: {w}")
    return EXIT_OK


def cmd_execute(args: argparse.Namespace) -> int:
    from kafka_reassign.execution.progress import ProgressView
    from kafka_reassign.run.prepare import new_run_id
    from kafka_reassign.throttle.record import FileRecordStore
    from kafka_reassign.planning.validate import validate_params
    params = validate_params(D.run_values_from_args(args))          # bad parameters: exit 2 before connecting
    raw, current = _raw_plan(args.plan)
    run_id = args.run_id or new_run_id()
    store = FileRecordStore(args.record_dir)
    last_print = [0.0]

    def on_progress(prog: ProgressView) -> None:
        if args.json:
            print(json.dumps({"event": "progress", **prog.to_json()}), flush=True)
        elif time.monotonic() - last_print[0] >= args.print_interval or prog.finished:
            print(prog.format_table(), flush=True)
            last_print[0] = time.monotonic()
        else:
            print(prog.summary(), flush=True)

    def on_event(msg: str) -> None:
        print(json.dumps({"event": "info", "message": msg}) if args.json else msg, flush=True)

    # systemd/Kubernetes stop a process with SIGTERM: turn it into an interrupt so the
    # finally blocks run (cancel our moves, restore the throttle) before exiting.
    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")
    if threading.current_thread() is not threading.main_thread():  # signals only reach the main thread
        return _execute(args, raw, current, params, run_id, store, on_progress, on_event)
    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        return _execute(args, raw, current, params, run_id, store, on_progress, on_event)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _execute(args: argparse.Namespace, raw: Any, current: Any, params: Any, run_id: str, store: Any,
             on_progress: Any, on_event: Any) -> int:
    from kafka_reassign.execution.store import FileExecutionStore
    from kafka_reassign.rehearsal.rehearse import rehearse_live
    from kafka_reassign.run.reassign import run_reassignment
    from kafka_reassign.execution.control import CancelRequested, RunControl
    from kafka_reassign.execution.ownership import run_submitted
    exec_store = FileExecutionStore(store.directory)
    control = RunControl(store.directory)

    def should_stop(view: Any) -> bool:
        if control.cancel_requested(run_id):   # raising takes the failure path: revert, then restore
            raise CancelRequested(f"run {run_id} cancelled by kafka-reassign cancel")
        return False

    with _admin(args) as admin:
        if current is not None:
            for w in _drift_warnings(current, admin.cluster_state(include_log_dirs=False)):
                on_event(f"warning: {w}")
        print(f"run id: {run_id} (throttle record in {store.directory})", flush=True)
        rates = None
        if args.snapshot:
            from kafka_reassign.cluster.snapshot import load_snapshot
            from kafka_reassign.cluster.state import rates_from_snapshot
            rates = rates_from_snapshot(load_snapshot(args.snapshot))
        if not params.dry_run:
            control.register(run_id, raw, _replicas_now(admin, raw))
        try:
            result = run_reassignment(admin, raw, params, store, run_id=run_id, on_progress=on_progress,
                                      on_event=on_event, produce_rates=rates, exec_store=exec_store,
                                      should_stop=should_stop, rehearser=rehearse_live,
                                      paused=lambda: control.pause_requested(run_id))
        except CancelRequested:
            if not params.cancel_on_failure:   # an explicit cancel reverts even so
                _cancel_moves(admin, raw, on_event, submitted=run_submitted(store, run_id))
            raise
        finally:
            control.unregister(run_id)
        if not result.dry_run:
            changes = result.progress.leader_changes if result.progress is not None else 0
            led = f", {changes} leader change(s)" if changes else ""
            print(f"run {run_id} finished: {result.steps_done} step(s) done{led}, throttles restored", flush=True)
        if args.json:
            print(json.dumps({"event": "result", **result.to_json()}))
    return EXIT_OK


def cmd_rehearse(args: argparse.Namespace) -> int:
    from kafka_reassign.rehearsal.rehearse import read_rehearsal_snapshot, rehearse
    from kafka_reassign.planning.validate import validate_params
    params = validate_params(D.run_values_from_args(args))
    raw, _ = _raw_plan(args.plan)
    if args.snapshot:
        from kafka_reassign.cluster.snapshot import load_snapshot
        snap = load_snapshot(args.snapshot)
    else:
        if not args.bootstrap_server and not args.command_config:
            raise BadInput("give --bootstrap-server (live cluster, read only) or --snapshot FILE")
        with _admin(args) as admin:
            snap = read_rehearsal_snapshot(admin, sample_seconds=args.sample_seconds)
    report = rehearse(snap, raw, params, network_bytes_per_sec=args.network_bytes_per_sec, on_event=lambda m: None)
    if args.out:
        Path(args.out).write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report.to_json()) if args.json else report.format())
    return EXIT_OK if report.outcome == "done" else EXIT_FAILED


def _replicas_now(admin: KafkaAdminPort, raw: Any) -> dict[str, list[int]]:
    """"topic-partition" -> replicas now, for the partitions of a plan (what a cancel goes back to)."""
    from kafka_reassign.planning.plan import ReassignmentPlan
    keys = {m.key for m in ReassignmentPlan.from_json(raw).moves}
    state = admin.cluster_state(include_log_dirs=False, topics=sorted({t for t, _ in keys}))
    return {f"{t}-{p}": list(info.replicas) for t, p in sorted(keys)
            if (info := state.partition(t, p)) is not None}


def _cancel_moves(admin: KafkaAdminPort, raw: Any, say: Any, *, submitted: SubmittedTargets | None,
                  original: Any = None) -> None:
    """Revert the in-flight moves of a plan (ours only), in their original replica order.

    :param submitted: the run's recorded submissions (``run_submitted``): only those are ours
    :param original: (topic, partition) -> replicas before the run, when known
    """
    from kafka_reassign.planning.plan import ReassignmentPlan
    from kafka_reassign.run.cancel import cancel_in_flight
    done = cancel_in_flight(admin, ReassignmentPlan.from_json(raw), submitted=submitted, original=original)
    say(f"in-flight moves reverted: {', '.join(done['cancelled']) or 'none'}")
    if done["errors"]:
        raise ReassignError(f"could not revert {done['errors']}")


def cmd_cancel(args: argparse.Namespace) -> int:
    """Stop a running execute: it reverts its in-flight moves and restores the throttle.

    When its process is gone, do both here from what it registered and recorded.
    """
    from kafka_reassign.throttle.record import FileRecordStore
    from kafka_reassign.throttle.restore import restore_throttle
    from kafka_reassign.execution.control import RunControl, original_replicas
    from kafka_reassign.execution.ownership import run_submitted
    control = RunControl(args.record_dir)
    entries = [e for e in control.running() if args.run_id in (None, e["run_id"])]
    if not entries:
        raise BadInput(f"no running execute{' ' + args.run_id if args.run_id else ''} in {args.record_dir}")
    if len(entries) > 1:
        raise BadInput("several executes are registered; name one with --run-id: "
                       + ", ".join(e["run_id"] for e in entries))
    entry = entries[0]
    run_id = entry["run_id"]
    if control.is_alive(entry):
        control.request_cancel(run_id)
        print(f"run {run_id}: asked to stop (process {entry['pid']} on {entry['host']}); waiting ...", flush=True)
        deadline = time.monotonic() + args.wait
        while control.is_registered(run_id) and time.monotonic() < deadline:
            time.sleep(0.2)
        if control.is_registered(run_id):
            _err(f"run {run_id} did not stop within {args.wait:g} s; run cancel again, or stop its process")
            return EXIT_FAILED
    else:
        if not args.bootstrap_server and not args.command_config:
            raise BadInput(f"run {run_id}'s process is gone: give --bootstrap-server to revert its moves here")
        print(f"run {run_id}: its process {entry['pid']} is gone; reverting its moves from here", flush=True)
        record = FileRecordStore(args.record_dir).get(run_id)
        with _admin(args) as admin:
            _cancel_moves(admin, entry["plan"], print, submitted=run_submitted(FileRecordStore(args.record_dir), run_id),
                          original=original_replicas(entry))
            if record is not None:
                restore_throttle(admin, FileRecordStore(args.record_dir), run_id)
        control.unregister(run_id)
    record = FileRecordStore(args.record_dir).get(run_id)
    if record is not None and not record.restored:
        _err(f"run {run_id} stopped but its throttle is not restored: run kafka-reassign restore --run-id {run_id}")
        return EXIT_FAILED
    print(f"run {run_id} cancelled: in-flight moves reverted to their original replicas, throttle restored")
    return EXIT_OK


def _saved_run(record_dir: str, run_id: str | None) -> tuple[str, Any] | None:
    """(run id, saved ProgressView) of ``run_id``, else of the newest registered execute.

    The view is None for a registered execute that has not saved its first progress yet
    (it saves after submitting its first moves).
    """
    from kafka_reassign.execution.store import FileExecutionStore
    from kafka_reassign.execution.progress import ProgressView
    from kafka_reassign.execution.control import RunControl
    if not Path(record_dir).is_dir():
        return None
    running = [entry["run_id"] for entry in RunControl(record_dir).running()]
    if run_id is None:
        if not running:
            return None
        run_id = running[-1]
    saved = FileExecutionStore(record_dir).load(run_id)
    if saved and saved.get("progress"):
        return run_id, ProgressView.from_json(saved["progress"])
    if run_id in running:
        return run_id, None
    raise BadInput(f"no saved progress of run {run_id!r} in {record_dir}")


def _live_rows(admin: KafkaAdminPort, rows: list[Any]) -> int:
    """Bytes left of the rows in flight, read now (as the UI's progress page does).

    :returns: how many bytes more (or fewer, negative) are left than the rows said
    """
    from kafka_reassign.execution.cluster_io import observe, read_cluster
    from kafka_reassign.execution.steps import StepMove
    moving = [r for r in rows if r.status == "in_flight"]
    steps = [StepMove(r.name.rpartition("-")[0], int(r.name.rpartition("-")[2]), tuple(r.current), tuple(r.target))
             for r in moving]
    if not steps:
        return 0
    view = read_cluster(admin, steps)
    delta = 0
    for row, step in zip(moving, steps):
        seen = observe(step, view)
        delta += seen.bytes_left - row.bytes_left
        row.bytes_left, row.bytes_total = seen.bytes_left, max(row.bytes_total, seen.bytes_total)
        if not seen.in_flight:
            row.status = "done"
    return delta


def cmd_status(args: argparse.Namespace) -> int:
    """The progress table of a run (the same rows as the UI's progress page), or every
    reassignment in flight on the cluster, and the throttle configs set."""
    from kafka_reassign.execution.progress import ProgressView, StepRow
    from kafka_reassign.throttle.specs import BROKER_KEYS, TOPIC_KEYS
    saved = _saved_run(args.record_dir, args.run_id)
    with _admin(args) as admin:
        state = admin.cluster_state(include_log_dirs=False)
        run_id, saved_view = saved if saved is not None else (None, None)
        from_cluster = saved_view is None
        if saved_view is None:
            rows = [StepRow(name=f"{t}-{p}", step="1/1", status="in_flight", current=list(inf.original),
                            target=list(inf.target)) for (t, p), inf in sorted(state.in_flight.items())]
            view = ProgressView(steps_total=len(rows), steps_in_flight=len(rows), rows=rows)
        else:
            view = saved_view
        delta = _live_rows(admin, view.rows)
        if from_cluster:
            view.bytes_left = sum(r.bytes_left for r in view.rows)
            view.bytes_total = sum(r.bytes_total for r in view.rows)
        else:   # the saved totals, brought up to date with what the rows in flight show now
            view.bytes_left = max(0, view.bytes_left + delta)
        view.bytes_moved = max(0, view.bytes_total - view.bytes_left)
        cfg = admin.describe_configs(sorted(state.alive_brokers), [], keys=BROKER_KEYS)
        cfg.update(admin.describe_configs([], sorted(state.topics), keys=TOPIC_KEYS))
    throttles = {f"{rt} {name}": {k: v for k, v in vals.items() if v is not None}
                 for (rt, name), vals in sorted(cfg.items()) if any(v is not None for v in vals.values())}
    if args.json:
        print(json.dumps({"run_id": run_id, "progress": view.to_json(), "throttles": throttles,
                          "in_flight": {f"{t}-{p}": v.to_json() for (t, p), v in state.in_flight.items()}}, indent=2))
        return EXIT_OK
    if run_id is not None and from_cluster:
        print(f"run {run_id}: starting, no progress saved yet (the rows are every reassignment on the cluster)")
    elif run_id is not None:
        age = time.time() - view.updated_at if view.updated_at else None
        print(f"run {run_id}: {view.outcome}" + (f", saved {age:.0f} s ago" if age is not None else ""))
    print(f"{len(state.in_flight)} reassignment(s) in progress on the cluster")
    if view.rows or run_id is not None:
        print(view.format_table())
    if throttles:
        print("Throttle configs set:")
        for res, vals in throttles.items():
            for k, v in vals.items():
                print(f"  {res}: {k}={v}")
    else:
        print("No replication throttle configs set.")
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    from kafka_reassign.throttle.restore import restore_throttle
    from kafka_reassign.throttle.record import FileRecordStore
    if not Path(args.record_dir).is_dir():
        raise BadInput(f"--record-dir {args.record_dir} is not a directory")
    store = FileRecordStore(args.record_dir)
    if args.run_id:
        if store.get(args.run_id) is None:
            raise BadInput(f"no throttle record for run {args.run_id!r} in {args.record_dir}")
        run_ids = [args.run_id]
    else:
        run_ids = [r.run_id for r in store.list_unrestored()]
    if not run_ids:
        print("nothing to restore: every recorded throttle has been restored")
        return EXIT_OK
    left = 0
    with _admin(args) as admin:
        for rid in run_ids:
            res = restore_throttle(admin, store, rid)
            if res.already_restored:
                print(f"run {rid}: already restored")
                continue
            left += print_restore(f"run {rid}: restored {len(res.changes)} config(s)", res)
    if left:
        print(f"{left} resource(s) still pending: run this command again once they are reachable")
        return EXIT_FAILED
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    try:
        from kafka_reassign.planning.spark import command as planner_cli
    except ImportError as exc:
        _err(f"the planner is not installed ({exc})")
        return EXIT_FAILED
    return int(planner_cli.run(args) or 0)


#: subcommand -> its function
COMMANDS = {"snapshot": cmd_snapshot, "plan": cmd_plan, "validate": cmd_validate, "execute": cmd_execute,
            "rehearse": cmd_rehearse, "status": cmd_status, "restore": cmd_restore, "cancel": cmd_cancel,
            "cordon": cmd_cordon, "uncordon": cmd_uncordon, "pause": cmd_pause, "resume": cmd_resume}


def _quiet_kafka_client(verbose: bool) -> None:
    """kafka-python logs every refused connection and retry at ERROR/WARNING; the CLI reports
    what matters itself (one line per problem), so its records show only with -v."""
    logging.getLogger("kafka").setLevel(logging.INFO if verbose else logging.CRITICAL + 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _quiet_kafka_client(args.verbose)
    try:
        return int(COMMANDS[args.command](args) or 0)
    except (ProblemListError, BadInput) as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    except CancelRequested as exc:   # asked for, so not reported as an error
        print(f"kafka-reassign: {exc}: in-flight moves reverted, throttle restored", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KafkaAdminError as exc:
        from kafka_reassign.cluster.admin import UnsupportedClusterError
        if isinstance(exc, UnsupportedClusterError):  # refused at connect: nothing read or written
            print(f"kafka-reassign: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if exc.operation == "connect":     # nothing was written: the address or network is wrong
            _err(f"cannot reach Kafka at {getattr(args, 'bootstrap_server', None) or 'the --command-config servers'}"
                 f" within {getattr(args, 'connect_timeout', D.CONNECT_TIMEOUT_SECONDS):g} s: check the address, "
                 "the port and that the brokers are up")
            return EXIT_BAD_INPUT
        _err(str(exc))
        return EXIT_FAILED
    except ReassignError as exc:
        _err(str(exc))
        return EXIT_FAILED
    except OSError as exc:
        # Files named on the command line (--out, --record-dir...) that cannot be written.
        _err(f"{exc.filename + ': ' if getattr(exc, 'filename', None) else ''}{exc.strerror or exc}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
