"""The report task: final placement vs plan, throttle configs prior vs now, time taken."""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_reassign_airflow.operators.common import RunStepOperator, admin_client

if TYPE_CHECKING:
    from airflow.sdk import Context

    from kafka_reassign.cluster.admin import ConfigsRead
    from kafka_reassign.cluster.state import ClusterState
    from kafka_reassign.run.payload import PreparedPayload
    from kafka_reassign.throttle.specs import ConfigChange


def _by_key(changes: list[Any]) -> dict[tuple[str, str, str], list[Any]]:
    out: dict[tuple[str, str, str], list[Any]] = {}
    for c in changes:
        out.setdefault((c.resource_type, c.name, c.key), []).append(c)
    return out


class ReassignmentReportOperator(RunStepOperator):
    """Final check and report: placement equals the plan, throttles are back, time taken.

    Runs after the throttle teardown. Prints the execution's outcome, before/after placement of
    every moved partition, the time taken, and, for every config the run changed, its prior
    value, ours and its value now. Fails when the execution did not end done, a partition is
    not where the plan wanted it or the run's own part of a config is still set (entries or
    values others set during the run do not count). A broker it cannot reach is reported as
    unknown, not a crash.
    """

    ui_color = "#e6f5e6"

    def __init__(self, *, work_task_ids: Sequence[str] = (), **kwargs: Any) -> None:
        """:param work_task_ids: tasks whose failure (or skip, after a manual fail) fails the run"""
        super().__init__(**kwargs)
        self.work_task_ids = list(work_task_ids)

    def _unfinished_work(self, context: Context) -> list[str]:
        """Work tasks of this run that failed or never ran (``task[map index]: state``)."""
        if not self.work_task_ids:
            return []
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=self.work_task_ids, run_ids=[ti.run_id])
        bad = []
        for key, state in sorted(states.get(ti.run_id, {}).items()):
            value = str(getattr(state, "value", state))
            if value in ("failed", "upstream_failed", "skipped", "removed"):
                bad.append(f"{key}: {value}")
        return bad

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.throttle.restore import finish_hint

        from kafka_reassign_airflow.record_store import VariableExecutionStore, VariableRecordStore

        payload = self.prepared(context)
        if payload.dry_run:
            raise AirflowSkipException("dry run: nothing to report")
        # As a teardown this runs after failures too: they decide the run, whatever the placement.
        unfinished = self._unfinished_work(context)
        if payload.nothing_to_move:
            # Nothing to move (a no-op plan, a re-run of a finished one): no work task ran, by design.
            unfinished = [u for u in unfinished if not u.endswith(": skipped")]
            self.log.info("nothing to move: every partition of the plan was already at its target")
        record = VariableRecordStore().get(context["run_id"])
        changes = record.changes if record is not None else []
        state, read = self._read(payload, changes)
        wrong, lines = _placement_lines(payload, state)
        not_restored, cfg_lines = _config_lines(changes, read, record)
        outcome, exec_line = _execution_line(VariableExecutionStore().load(context["run_id"]))
        took = time.time() - (payload.started_at or time.time())
        lines = [exec_line, *lines, *cfg_lines, f"Time taken: {took:.1f} s for {len(payload.steps)} step(s)"]
        self.log.info("\n".join(lines))
        if outcome not in ("done", None) and not unfinished:
            unfinished = [f"execution {outcome}"]
        if wrong or not_restored or unfinished:
            raise AirflowFailException(
                (f"the reassignment did not complete ({', '.join(unfinished)}). " if unfinished else "")
                + (f"partitions not at their planned replicas: {', '.join(wrong)}. " if wrong else "")
                + (f"configs of this run not restored: {', '.join(not_restored)}; {finish_hint(context['run_id'])}"
                   if not_restored else ""))
        return {"partitions": len(payload.moves), "seconds": round(took, 3),
                "configs_restored": len(changes), "outcome": outcome}

    def _read(self, payload: PreparedPayload, changes: list[ConfigChange]) -> tuple[ClusterState, ConfigsRead | None]:
        """The placement of the plan's topics and, per resource, the configs the run changed."""
        admin = admin_client(self.kafka_conn_id)
        try:
            state = admin.cluster_state(include_log_dirs=False, topics=payload.run.plan.topics)
            # Per resource: one broker down must not hide the others (nor crash the report).
            read = admin.read_configs(
                broker_ids=sorted({int(c.name) for c in changes if c.resource_type == "broker"}),
                topics=sorted({c.name for c in changes if c.resource_type == "topic"}),
                keys=sorted({c.key for c in changes})) if changes else None
        finally:
            admin.close()
        return state, read


def _placement_lines(payload: PreparedPayload, state: ClusterState) -> tuple[list[str], list[str]]:
    """(partitions not where the plan wants them, the before -> after lines)."""
    lines = ["Placement (before -> after):"]
    wrong: list[str] = []
    for m in payload.moves:
        p = state.partition(m.topic, m.partition)
        after = list(p.replicas) if p is not None else None
        mark = "" if after == list(m.replicas) else f"   <-- plan wants {list(m.replicas)}"
        if mark:
            wrong.append(m.name)
        lines.append(f"  {m.name}: {payload.before.get(m.name)} -> {after}{mark}")
    return wrong, lines


def _config_lines(changes: list[Any], read: Any, record: Any) -> tuple[list[str], list[str]]:
    """(this run's configs still set, the prior -> ours -> now lines)."""
    from kafka_reassign.throttle.specs import leftovers

    now_cfg = read.values if read is not None else {}
    unreachable = read.unreachable if read is not None else {}
    lines = ["Throttle configs (prior -> ours -> now):"]
    # Only our own part counts: entries or values others set during the run are theirs.
    left = {(c.resource_type, c.name, c.key)
            for c in leftovers([c for c in changes if c.resource not in unreachable], now_cfg)}
    not_restored: list[str] = []
    for (rtype, name, key), group in _by_key(changes).items():
        res = f"{rtype} {name} {key}"
        if (rtype, name) in unreachable:
            flag, now = "   <-- UNKNOWN (unreachable)", "?"
            not_restored.append(f"{res} (unreachable)")
        else:
            now = repr((now_cfg.get((rtype, name)) or {}).get(key))
            flag = "   <-- NOT RESTORED" if (rtype, name, key) in left else ""
            if flag:
                not_restored.append(res)
        lines.append(f"  {res}: {group[0].prior!r} -> {group[-1].value!r} -> {now}{flag}")
    if not changes:
        lines.append("  (this run changed no config)")
    if record is not None and record.pending:
        lines.append("Restore pending (retried by the kafka_throttle_reconciler DAG):")
        lines += [f"  {res}: {why}" for res, why in sorted(record.pending.items())]
    if record is not None and record.notes:
        lines += ["Notes:"] + [f"  {n}" for n in record.notes]
    return not_restored, lines


def _execution_line(saved: dict[str, Any] | None) -> tuple[str | None, str]:
    """The execution's outcome as the executor last saved it, and a line saying it."""
    from kafka_reassign.execution.progress import ProgressView

    if not saved or not saved.get("progress"):
        return None, "Execution: no step was run"
    view = ProgressView.from_json(saved["progress"])
    return view.outcome, f"Execution: {view.outcome.upper()} - {view.summary()}"
