"""In-process Airflow for the DAG tests: one migrated SQLite metadata DB per test session.

Airflow reads its configuration when ``airflow`` is first imported, so :func:`configure_env`
must run before that (the conftests under tests/dags and tests/integration call it at import
time). ``airflow db migrate`` costs seconds, so a migrated template DB is kept in the temp dir
per Airflow version and copied for each session; every session still gets its own fresh copy.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from sim_snapshots import dynamic_configs as throttle_configs  # noqa: F401  (tests use both names)

ROOT = Path(__file__).resolve().parents[1]
DAGS_FOLDER = ROOT / "dags"
_HOME_ENV = "KAFKA_REASSIGN_TEST_AIRFLOW_HOME"


def configure_env() -> Path:
    """Point Airflow at a session AIRFLOW_HOME (SQLite, our dags/, no examples); idempotent.

    Returns the AIRFLOW_HOME. Must run before the first ``import airflow`` of the process.
    """
    home_s = os.environ.get(_HOME_ENV)
    if home_s is None:
        home_s = tempfile.mkdtemp(prefix="kafka-reassign-airflow-")
        os.environ[_HOME_ENV] = home_s
    home = Path(home_s)
    if "airflow" in sys.modules and os.environ.get("AIRFLOW_HOME") != home_s:
        # Too late to redirect Airflow: it already read its config from elsewhere.
        raise RuntimeError("airflow was imported before tests/airflow_env.configure_env(); "
                           "import it only inside tests/fixtures")
    env = {
        "AIRFLOW_HOME": home_s,
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # Plugins come from the installed package; a plugins folder scan is not needed.
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        # dag.test runs tasks in-process with no scheduler, so the reschedule race the floor
        # guards against cannot happen here (the real-stack tests keep the default).
        "AIRFLOW__KAFKA_REASSIGN__MIN_RETURN_SECONDS": "0",
    }
    os.environ.update(env)
    return home


def _template_db() -> Path:
    """A migrated SQLite DB for this Airflow version, built once per machine and reused."""
    from importlib.metadata import version

    tdir = Path(tempfile.gettempdir()) / f"kafka-reassign-airflow-template-{version('apache-airflow-core')}-{os.getuid()}"
    db = tdir / "airflow.db"
    if db.exists():
        return db
    tdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="migrate-", dir=tdir))
    env = dict(os.environ, AIRFLOW_HOME=str(work),
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{work}/airflow.db",
               AIRFLOW__CORE__LOAD_EXAMPLES="False")
    airflow_bin = Path(sys.executable).parent / "airflow"
    subprocess.run([str(airflow_bin), "db", "migrate"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    # Atomic publish so concurrent sessions never copy a half-written DB.
    os.replace(work / "airflow.db", db)
    shutil.rmtree(work, ignore_errors=True)
    return db


def migrate_once() -> Path:
    """Copy (or create) the migrated metadata DB into the session AIRFLOW_HOME; idempotent."""
    home = configure_env()
    db = home / "airflow.db"
    if not db.exists():
        t0 = time.monotonic()
        shutil.copyfile(_template_db(), db)
        os.environ.setdefault("KAFKA_REASSIGN_MIGRATE_SECONDS", f"{time.monotonic() - t0:.1f}")
    from airflow import settings

    if settings.Session is None or getattr(settings, "engine", None) is None:
        settings.configure_orm()
    return home


def kafka_conn_env(bootstrap: str, conn_id: str = "kafka_default", **extra: Any) -> dict[str, str]:
    """The AIRFLOW_CONN_<ID> variable for a Kafka provider connection to ``bootstrap``.

    :param bootstrap: host:port,host:port
    :param conn_id: connection id
    :param extra: more librdkafka keys (security settings)
    """
    cfg = {"bootstrap.servers": bootstrap, **extra}
    return {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps({"conn_type": "kafka", "extra": cfg})}


@contextmanager
def kafka_connection(bootstrap: str, conn_id: str = "kafka_default", **extra: Any) -> Iterator[None]:
    """Set a Kafka connection through the environment for the duration of the block."""
    env = kafka_conn_env(bootstrap, conn_id, **extra)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def load_dag(dag_id: str = "kafka_reassign"):
    """Parse dags/ the way the dag-processor does and return one DAG (import errors raise)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(DAGS_FOLDER))
    dag = bag.get_dag(dag_id)
    if dag is None:
        raise RuntimeError(f"DAG {dag_id} not found; import errors: {bag.import_errors}")
    return dag


def task_states(dr: Any) -> dict[str, str | None]:
    """``task_id[map_index]`` -> state for a finished DagRun returned by ``dag.test``."""
    from airflow.utils.session import create_session
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dr.dag_id,
                                                          TaskInstance.run_id == dr.run_id)).all()
        return {(f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id):
                (str(ti.state.value) if hasattr(ti.state, "value") else ti.state) for ti in rows}


def xcom(dr: Any, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
    """An XCom value of a run (deserialized), for assertions."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(select(XComModel).where(
            XComModel.dag_id == dr.dag_id, XComModel.run_id == dr.run_id, XComModel.task_id == task_id,
            XComModel.key == key, XComModel.map_index == map_index)).first()
        if row is None:
            return None
        value = row.value
        return json.loads(value) if isinstance(value, str) else value


#: DagRun ids up to this one belong to earlier runs: the session's tests share one metadata DB,
#: so a watcher must not read an earlier test's task states (set when a Watcher starts).
_RUNS_BEFORE = [0]


def _last_run_id() -> int:
    from sqlalchemy import func, select

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return int(session.scalar(select(func.max(DagRun.id))) or 0)


def ti_state(dag_id: str, task_id: str, map_index: int = -1) -> str | None:
    """State of ``task_id`` in the newest run started since the watcher began (for watcher threads during dag.test)."""
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.scalars(select(TaskInstance).join(
            DagRun, (DagRun.dag_id == TaskInstance.dag_id) & (DagRun.run_id == TaskInstance.run_id)).where(
            TaskInstance.dag_id == dag_id, TaskInstance.task_id == task_id, TaskInstance.map_index == map_index,
            DagRun.id > _RUNS_BEFORE[0]).order_by(DagRun.id.desc())).first()
        if ti is None or ti.state is None:
            return None
        return str(getattr(ti.state, "value", ti.state))


class Watcher:
    """A background thread that waits for a condition, then acts (fault injection mid-run).

    :param steps: list of (condition, action) run in order; each condition is polled
    :param interval: seconds between polls
    :param timeout: give up after this many seconds (the test then sees ``error``)
    """

    def __init__(self, steps: list[tuple[Any, Any]], interval: float = 0.02, timeout: float = 120.0) -> None:
        import threading

        self.steps = steps
        self.interval = interval
        self.timeout = timeout
        self.done: list[int] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="fault-injector")

    def _run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            for i, (cond, action) in enumerate(self.steps):
                while not self._stop.is_set():
                    if cond():
                        action()
                        self.done.append(i)
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"watcher step {i} never triggered")
                    time.sleep(self.interval)
        except BaseException as exc:  # reported to the test
            self.error = exc

    def __enter__(self) -> "Watcher":
        # Import Airflow's models and configure the ORM mappers here, in the main thread: a
        # first query from the watcher thread while dag.test imports modules deadlocks on
        # the import lock.
        load_dag()
        ti_state("__warm_up__", "__warm_up__")
        _RUNS_BEFORE[0] = _last_run_id()
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.thread.join(timeout=10)


class IsrSampler:
    """Samples every partition's ISR in a background thread; records min-ISR violations.

    :param cluster: a kafka_sim.SimulatedCluster
    :param min_isr: topic -> min.insync.replicas
    """

    def __init__(self, cluster: Any, min_isr: dict[str, int], interval: float = 0.01) -> None:
        import threading

        self.cluster = cluster
        self.min_isr = min_isr
        self.interval = interval
        self.samples = 0
        self.violations: list[tuple[float, str, list[int]]] = []
        self.moving_seen: set[str] = set()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="isr-sampler")

    def _run(self) -> None:
        snap = self.cluster.snapshot()
        parts = [(t["name"], p["partition"]) for t in snap["topics"] for p in t["partitions"]]
        while not self._stop.is_set():
            for topic, p in parts:
                st = self.cluster.partition_state(topic, p)
                if st["adding"] or st["removing"]:
                    self.moving_seen.add(f"{topic}-{p}")
                need = self.min_isr.get(topic, 1)
                if len(st["isr"]) < need:
                    self.violations.append((self.cluster.sim_time(), f"{topic}-{p}", list(st["isr"])))
            self.samples += 1
            time.sleep(self.interval)

    def __enter__(self) -> "IsrSampler":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.thread.join(timeout=10)


def run_dag(conf: dict[str, Any], dag_id: str = "kafka_reassign") -> Any:
    """``dag.test(run_conf=conf)`` of a DAG in dags/; returns the DagRun."""
    dag = load_dag(dag_id)
    return dag.test(run_conf=conf)


def read_record(run_id: str) -> Any:
    """The throttle record a run left in the metadata DB (None when it wrote none)."""
    from kafka_reassign_airflow.record_store import VariableRecordStore

    return VariableRecordStore().get(run_id)
