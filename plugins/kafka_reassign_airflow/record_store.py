"""Durable run records in the Airflow metadata DB (Airflow Variables).

Two things must outlive a worker crash and be readable by later runs, the reconciler DAG and
people: the throttle record of each run (every config value we changed, with its prior
value, written *before* the first config write) and the cluster lock (which run is moving
replicas on which cluster). Both are stored as JSON Variables because Variables are the
metadata-DB storage a task may read and write through the Task SDK (no direct DB access
from workers in Airflow 3), and operators can inspect them in the UI (Admin -> Variables).

Inside a task (or a trigger) the Task SDK's ``airflow.sdk.Variable`` is used; outside one
(the demo, tests, a maintenance shell) the same rows are read through Airflow's ORM model.

Key layout (prefix :data:`PREFIX`):
  ``kafka_reassign.throttle.<run id>`` -> ThrottleRecord JSON
  ``kafka_reassign.lock.<cluster id>`` -> {"dag_id", "run_id", "since"}
  ``kafka_reassign.exec.<run id>`` -> {"state": executor state, "progress": ProgressView} (after every poll)
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Callable

from kafka_reassign.errors import ThrottleRecordError
from kafka_reassign.throttle.record import RecordStoreBase, ThrottleRecord

PREFIX = "kafka_reassign."
THROTTLE_PREFIX = PREFIX + "throttle."
LOCK_PREFIX = PREFIX + "lock."
EXEC_PREFIX = PREFIX + "exec."
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _safe(s: str) -> str:
    # Run ids carry ':' and '+', and Variable keys travel in REST paths: encode reversibly.
    return _UNSAFE.sub(lambda m: f"~{ord(m.group()):02X}", s)


def in_task_context() -> bool:
    """True inside a task or trigger process, where the Task SDK talks to the API server."""
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:  # pragma: no cover
        return False
    return getattr(task_runner, "SUPERVISOR_COMMS", None) is not None


class _Vars:
    """Get/set/delete/list JSON Variables through the Task SDK or, outside a task, the ORM."""

    @staticmethod
    def get(key: str) -> Any | None:
        if in_task_context():
            from airflow.sdk import Variable

            raw = Variable.get(key, default=None)
        else:
            from airflow.models.variable import Variable as VariableModel

            raw = VariableModel.get(key, default_var=None)
        if raw is None:
            return None
        return json.loads(raw) if isinstance(raw, str) else raw

    @staticmethod
    def set(key: str, value: Any, description: str) -> None:
        text = json.dumps(value, sort_keys=True)
        if in_task_context():
            from airflow.sdk import Variable

            Variable.set(key, text, description=description)
        else:
            from airflow.models.variable import Variable as VariableModel

            VariableModel.set(key, text, description=description)

    @staticmethod
    def delete(key: str) -> None:
        if in_task_context():
            from airflow.sdk import Variable

            Variable.delete(key)
        else:
            from airflow.models.variable import Variable as VariableModel

            VariableModel.delete(key)

    @staticmethod
    def keys(prefix: str) -> list[str]:
        if in_task_context():
            from airflow.sdk import Variable

            return sorted(Variable.keys(prefix=prefix))
        from sqlalchemy import select

        from airflow.models.variable import Variable as VariableModel
        from airflow.utils.session import create_session

        with create_session() as session:
            return sorted(session.scalars(select(VariableModel.key).where(VariableModel.key.startswith(prefix))))


class VariableRecordStore(RecordStoreBase):
    """:class:`kafka_reassign.throttle.record.RecordStore` on Airflow Variables (the metadata DB).

    A put is one committed write through the API server, so once ``put`` returns the record
    survives the worker; that is the ordering :func:`kafka_reassign.throttle.apply.apply_throttle`
    relies on (record first, then config writes).
    """

    def key_for(self, run_id: str) -> str:
        """The Variable key of ``run_id``'s throttle record."""
        return THROTTLE_PREFIX + _safe(run_id)

    def put(self, record: ThrottleRecord) -> None:
        try:
            _Vars.set(self.key_for(record.run_id), record.to_json(),
                      description=f"kafka_reassign throttle record of run {record.run_id} "
                                  f"(cluster {record.cluster_id}); restored={record.restored}")
        except Exception as exc:
            raise ThrottleRecordError(f"cannot write the throttle record of {record.run_id} "
                                      f"to the Airflow metadata DB: {exc}") from exc
        # Read back: a record we cannot read later is no record at all.
        back = self.get(record.run_id)
        if back is None or back.to_json() != ThrottleRecord.from_json(record.to_json()).to_json():
            raise ThrottleRecordError(f"the throttle record of {record.run_id} did not read back as written")

    def get(self, run_id: str) -> ThrottleRecord | None:
        try:
            data = _Vars.get(self.key_for(run_id))
        except Exception as exc:
            raise ThrottleRecordError(f"cannot read the throttle record of {run_id}: {exc}") from exc
        return None if data is None else ThrottleRecord.from_json(data)

    def list_all(self) -> list[ThrottleRecord]:
        """Every throttle record, oldest first."""
        records = []
        for key in _Vars.keys(THROTTLE_PREFIX):
            data = _Vars.get(key)
            if data is not None:
                records.append(ThrottleRecord.from_json(data))
        return sorted(records, key=lambda r: r.created_at)

    def __repr__(self) -> str:
        return "Airflow Variables " + THROTTLE_PREFIX + "*"


class VariableExecutionStore:
    """:class:`kafka_reassign.execution.store.ExecutionStore` on Airflow Variables.

    The execute task saves after every poll; a retried or cleared task resumes from it and the
    UI progress page reads the progress from it. The state is compact (a character per step).
    """

    def key_for(self, run_id: str) -> str:
        return EXEC_PREFIX + _safe(run_id)

    def save(self, run_id: str, state: dict[str, Any], progress: dict[str, Any]) -> None:
        _Vars.set(self.key_for(run_id), {"state": state, "progress": progress},
                  description=f"kafka_reassign execution state and progress of run {run_id}")

    def load(self, run_id: str) -> dict[str, Any] | None:
        return _Vars.get(self.key_for(run_id))


class ClusterLockError(Exception):
    """Another run holds the cluster: the message names it and says what to do."""


class ClusterLock:
    """One reassignment per Kafka cluster at a time, across DAGs and runs.

    Keyed by the cluster id read from Kafka, not the connection: two connections to one cluster
    share one lock. Runs on different clusters go in parallel (``max_active_runs`` is fleet-sized).

    Variables have no compare-and-swap, so the lock is a lease that is written then read back:
    of two prepares that both find the lock free, the one that writes last keeps it, and the
    other fails when its read-back comes after that write. The race left:
    A reads free, B reads free, A writes and reads back, *then* B writes and reads back - both
    pass, within the few milliseconds between a read and a write of the Variable. Then the
    in-flight check still stands (prepare refuses partitions that anyone is reassigning
    without a record of its run), but two runs could start moves on one cluster at once.
    A lock whose run is no longer running (the worker died and the run was marked failed) is
    stale and is taken over.

    :param is_running: (dag_id, run_id) -> whether that run is still queued or running
    """

    def __init__(self, is_running: Callable[[str, str], bool]) -> None:
        self.is_running = is_running

    @staticmethod
    def key_for(cluster_id: str) -> str:
        return LOCK_PREFIX + _safe(cluster_id or "unknown-cluster")

    @staticmethod
    def holder(cluster_id: str) -> dict[str, Any] | None:
        """Who holds the lock of ``cluster_id`` (dict with dag_id, run_id, since) or None."""
        return _Vars.get(ClusterLock.key_for(cluster_id))

    def acquire(self, cluster_id: str, dag_id: str, run_id: str) -> dict[str, Any] | None:
        """Take the lock; return the stale holder taken over (or None).

        :raises ClusterLockError: when a different run that is still running holds it
        """
        key = self.key_for(cluster_id)
        current = _Vars.get(key)
        stale = None
        if current and current.get("run_id") != run_id:
            if self.is_running(current.get("dag_id", ""), current.get("run_id", "")):
                raise ClusterLockError(
                    f"Kafka cluster {cluster_id} is being reassigned by run {current.get('run_id')!r} of DAG "
                    f"{current.get('dag_id')!r} (since {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(current.get('since', 0)))} UTC). "
                    "Wait for it to finish, or mark it failed if its worker is gone; then trigger again.")
            stale = current
        mine = {"dag_id": dag_id, "run_id": run_id, "since": time.time()}
        _Vars.set(key, mine, description=f"kafka_reassign: cluster {cluster_id} is being reassigned by {run_id}")
        back = _Vars.get(key)
        if not back or back.get("run_id") != run_id:
            raise ClusterLockError(f"lost the race for the lock of Kafka cluster {cluster_id} to "
                                   f"run {back.get('run_id') if back else None!r}")
        return stale

    @staticmethod
    def release(cluster_id: str, run_id: str) -> bool:
        """Drop the lock if ``run_id`` holds it; return whether it did."""
        key = ClusterLock.key_for(cluster_id)
        current = _Vars.get(key)
        if current and current.get("run_id") == run_id:
            _Vars.delete(key)
            return True
        return False
