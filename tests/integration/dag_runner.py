"""Run a DAG with `airflow dags test` in a subprocess against its own AIRFLOW_HOME.

A subprocess (not dag.test in the pytest process) because the reconciler test must be able
to kill the worker with SIGKILL mid-batch, and each test wants its own metadata DB. The
migrated SQLite template of tests/airflow_env.py is copied, so no test pays for a migration.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "tests"))


@dataclass
class DagRunner:
    """An AIRFLOW_HOME plus the environment `airflow dags test` runs with.

    :param home: AIRFLOW_HOME (created; SQLite DB copied from the migrated template)
    :param bootstrap: the simulated cluster's bootstrap servers (kafka_default connection)
    :param extra_env: more environment
    """

    home: Path
    bootstrap: str
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from airflow_env import _template_db

        self.home.mkdir(parents=True, exist_ok=True)
        if not (self.home / "airflow.db").exists():
            shutil.copyfile(_template_db(), self.home / "airflow.db")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "_AIRFLOW"))}
        env.update(
            AIRFLOW_HOME=str(self.home),
            PATH=f"{VENV_BIN}:{env.get('PATH', '')}",
            AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{self.home / 'airflow.db'}",
            AIRFLOW__CORE__PLUGINS_FOLDER=str(self.home / "plugins"),
            AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
            AIRFLOW_CONN_KAFKA_DEFAULT=json.dumps({"conn_type": "kafka",
                                                   "extra": {"bootstrap.servers": self.bootstrap}}),
            # The planning job is spark-submitted to this connection's master.
            AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        return env

    def start(self, dag_id: str, conf: dict[str, Any], log_name: str | None = None) -> subprocess.Popen:
        """Start `airflow dags test DAG_ID -c CONF` in its own process group."""
        log = open(self.home / f"{log_name or dag_id}.log", "wb")
        try:
            return subprocess.Popen([str(VENV_BIN / "airflow"), "dags", "test", dag_id, "-c", json.dumps(conf)],
                                    env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    def run(self, dag_id: str, conf: dict[str, Any], timeout: float = 400.0) -> tuple[int, str]:
        """Run a DAG to its end; returns (exit code, log text)."""
        proc = self.start(dag_id, conf)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise
        return rc, (self.home / f"{dag_id}.log").read_text(errors="replace")

    def query(self, code: str) -> Any:
        """Run Python against this home's metadata DB; the code must print one JSON value."""
        out = subprocess.run([sys.executable, "-c", code], env=self.env(), capture_output=True, text=True,
                             timeout=120)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """Every run of ``dag_id`` with its state and task states, oldest first."""
        return self.query(f"""
import json
from sqlalchemy import select
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.utils.session import create_session
out = []
with create_session() as s:
    for dr in s.scalars(select(DagRun).where(DagRun.dag_id == {dag_id!r}).order_by(DagRun.id)):
        tis = s.scalars(select(TaskInstance).where(TaskInstance.dag_id == dr.dag_id,
                                                  TaskInstance.run_id == dr.run_id)).all()
        out.append({{"run_id": dr.run_id, "state": str(getattr(dr.state, "value", dr.state)),
                    "tasks": {{(t.task_id + (f"[{{t.map_index}}]" if t.map_index >= 0 else "")):
                              str(getattr(t.state, "value", t.state)) for t in tis}}}})
print(json.dumps(out))
""")

    def mark_run_failed(self, dag_id: str, run_id: str) -> None:
        """What the scheduler does to a run whose worker vanished: its unfinished tasks and the
        run end failed (the teardown never ran - there was no worker to run it)."""
        self.query(f"""
import json
from sqlalchemy import select
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.utils.session import create_session
from airflow.utils.state import DagRunState, TaskInstanceState
with create_session() as s:
    dr = s.scalars(select(DagRun).where(DagRun.dag_id == {dag_id!r}, DagRun.run_id == {run_id!r})).one()
    for ti in s.scalars(select(TaskInstance).where(TaskInstance.dag_id == dr.dag_id, TaskInstance.run_id == dr.run_id)):
        if ti.state not in (TaskInstanceState.SUCCESS, TaskInstanceState.SKIPPED, TaskInstanceState.FAILED):
            ti.state = TaskInstanceState.FAILED
    dr.state = DagRunState.FAILED
print(json.dumps(True))
""")


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Kill a process started with start_new_session=True and everything it forked."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
