"""Pause and resume a DAG run's execute task through an Airflow Variable.

The execute task reads ``kafka_reassign.pause.<run id>`` (run id encoded as in
:mod:`kafka_reassign_airflow.record_store`) before each poll: while it exists, no new move
starts and the moves in flight finish (the same as outside a maintenance window); deleting it
resumes the run. While paused with nothing in flight the task waits deferred and wakes once a
minute to read the Variable again, so a resume takes effect within about a minute.

Set it with ``airflow variables set``, the REST API (``POST /api/v2/variables``, ``DELETE
/api/v2/variables/<key>``) or the progress page's buttons (``POST /kafka-reassign/api/pause``).
"""
from __future__ import annotations

import time

from kafka_reassign_airflow.record_store import PREFIX, _safe, _Vars

PAUSE_PREFIX = PREFIX + "pause."


def pause_key(run_id: str) -> str:
    """The Variable that pauses ``run_id`` (what ``airflow variables set`` is given)."""
    return PAUSE_PREFIX + _safe(run_id)


def is_paused(run_id: str) -> bool:
    """Whether the pause Variable exists (whatever its value: ``airflow variables set KEY yes`` pauses too)."""
    try:
        return _Vars.get(pause_key(run_id)) is not None
    except ValueError:  # not JSON: set by hand, still a pause
        return True


def pause(run_id: str, by: str = "") -> None:
    """Hold back new moves of ``run_id`` until :func:`resume`.

    :param by: who asked (kept in the Variable for the audit trail)
    """
    _Vars.set(pause_key(run_id), {"since": time.time(), "by": by},
              description=f"kafka-reassign: run {run_id} is paused (delete to resume)")


def resume(run_id: str) -> bool:
    """Lift the pause; returns whether ``run_id`` was paused."""
    if not is_paused(run_id):
        return False
    _Vars.delete(pause_key(run_id))
    return True
