"""A real Airflow 3 deployment in subprocesses, for the REST API and UI plugin tests.

`AirflowStack` runs `airflow db migrate`, then api-server, scheduler, dag-processor and
triggerer as separate processes sharing one AIRFLOW_HOME in a temp dir: SQLite metadata
DB and LocalExecutor (Airflow 3 has no SequentialExecutor; `airflow standalone` runs this
same pair). Auth is the simple auth manager with a password written up front, so the
REST API is used exactly as an operator would: `POST /auth/token`, then bearer calls.
Every wait is bounded; `stop()` ends each process group it started.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
TERMINAL_RUN_STATES = {"success", "failed"}


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AirflowApiError(RuntimeError):
    """An unexpected HTTP status from the Airflow REST API (status and body kept)."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} -> {status}: {body[:2000]}")
        self.status = status
        self.body = body


@dataclass
class AirflowStack:
    """Airflow components as subprocesses.

    :param home: AIRFLOW_HOME (created); logs of each component go to home/<name>.log
    :param dags_folder: folder the dag-processor parses
    :param connections: conn_id -> connection dict (JSON form of AIRFLOW_CONN_<ID>)
    :param extra_env: more environment (e.g. AIRFLOW__... settings) for every component
    :param components: which long-running components to start
    """

    home: Path
    dags_folder: Path
    connections: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    components: tuple[str, ...] = COMPONENTS
    username: str = "admin"
    password: str = "rest-api-test-password"
    port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    _token: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment every component (and `airflow` CLI call) runs with."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "_AIRFLOW"))}
        env.update(
            AIRFLOW_HOME=str(self.home),
            PATH=f"{VENV_BIN}:{env.get('PATH', '')}",
            AIRFLOW__CORE__DAGS_FOLDER=str(self.dags_folder),
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{self.home / 'airflow.db'}",
            AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            AIRFLOW__CORE__PARALLELISM="4",
            AIRFLOW__CORE__LOAD_EXAMPLES="false",
            # Paused: scheduled DAGs (kafka_rebalance, the reconciler) must not start on their own
            # next to the run under test; wait_for_dag() unpauses the DAG a test triggers.
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="true",
            # Only the runs a test triggers: a scheduled rebalance or reconciler run started by
            # unpausing would act on whatever cluster kafka_default points at, next to the test.
            AIRFLOW__KAFKA_REASSIGN__REBALANCE_SCHEDULE="none",
            AIRFLOW__KAFKA_REASSIGN__RECONCILER_SCHEDULE="none",
            AIRFLOW__CORE__AUTH_MANAGER="airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=f"{self.username}:admin",
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(self.home / "passwords.json"),
            # Components sign and check each other's JWTs: one shared secret.
            AIRFLOW__API_AUTH__JWT_SECRET="airflow-stack-test-jwt-secret-0123456789",
            AIRFLOW__API__SECRET_KEY="airflow-stack-test-api-secret",
            AIRFLOW__API__BASE_URL=self.base_url,
            AIRFLOW__API__WORKERS="1",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"{self.base_url}/execution/",
            # Fast pick-up of DAG files and of new runs; tests wait on these loops.
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
            AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL="5",
            AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
            AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK="false",
            AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL="5",
            AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
            PYTHONUNBUFFERED="1",
        )
        for conn_id, conn in self.connections.items():
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
        env.update(self.extra_env)
        return env

    # -- lifecycle -------------------------------------------------------------------
    def start(self, timeout: float = 180.0) -> None:
        """Migrate the DB, start the components, wait until the API answers."""
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps({self.username: self.password}))
        out = subprocess.run(
            [str(VENV_BIN / "airflow"), "db", "migrate"],
            env=self.env(), capture_output=True, text=True, timeout=300,
        )
        if out.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        for name in self.components:
            args = [str(VENV_BIN / "airflow"), name]
            if name == "api-server":
                args += ["--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
            log = open(self.home / f"{name}.log", "wb")
            # Own process group, so stop() also ends the task/trigger children it forks.
            self.procs[name] = subprocess.Popen(
                args, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
            log.close()
        self.wait_for(self._api_up, timeout, "api-server health")

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM each component's process group, SIGKILL what is left after `grace`."""
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # children (task runners, supervisors) may outlive their parent
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> "AirflowStack":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check_alive(self) -> None:
        """Raise with the component's log tail if one of them exited."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"airflow {name} exited with {proc.returncode}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, chars: int = 4000) -> str:
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def diagnostics(self) -> str:
        """Log tails of every component and task, for assertion messages."""
        parts = [f"--- {name} ---\n{self.log_tail(name, 2500)}" for name in self.procs]
        logs = self.home / "logs"
        if logs.exists():
            for path in sorted(logs.rglob("*.log*"), key=lambda p: p.stat().st_mtime)[-8:]:
                parts.append(f"--- {path.relative_to(logs)} ---\n{path.read_text(errors='replace')[-2500:]}")
        return "\n".join(parts)

    def wait_for(self, predicate: Any, timeout: float, what: str, interval: float = 0.5) -> Any:
        """Poll `predicate()` until truthy; fail with diagnostics after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            value = predicate()
            if value:
                return value
            time.sleep(interval)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}\n{self.diagnostics()}")

    # -- HTTP ------------------------------------------------------------------------
    def request(
        self, method: str, path: str, body: Any = None, *, auth: bool = True, expect: tuple[int, ...] = (200,),
        timeout: float = 30.0,
    ) -> Any:
        """Call the API; returns decoded JSON (or text), raises `AirflowApiError` on other statuses.

        The stack's metadata DB is SQLite: a write that meets another component's write lock for
        longer than SQLite's busy timeout comes back as 500 "Database error" with its transaction
        rolled back, so it is sent again (up to 4 times) rather than failing the test."""
        for attempt in range(4):
            try:
                return self._request_once(method, path, body, auth=auth, expect=expect, timeout=timeout)
            except AirflowApiError as err:
                if err.status != 500 or "Database error" not in err.body or attempt == 3:
                    raise
                time.sleep(1.0 + attempt)
        raise AssertionError("unreachable")

    def _request_once(
        self, method: str, path: str, body: Any, *, auth: bool, expect: tuple[int, ...], timeout: float,
    ) -> Any:
        url = self.base_url + path
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read().decode()
                ctype = resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as err:
            status, raw, ctype = err.code, err.read().decode(errors="replace"), err.headers.get("Content-Type", "")
        if status not in expect:
            raise AirflowApiError(method, url, status, raw)
        return json.loads(raw) if "json" in ctype and raw else raw

    def _api_up(self) -> bool:
        try:
            health = self.request("GET", "/api/v2/monitor/health", auth=False, timeout=5)
        except (OSError, AirflowApiError):
            return False
        return health.get("metadatabase", {}).get("status") == "healthy"

    def token(self) -> str:
        """`POST /auth/token` with the admin's username and password (cached)."""
        if self._token is None:
            resp = self.request(
                "POST", "/auth/token", {"username": self.username, "password": self.password},
                auth=False, expect=(200, 201),
            )
            self._token = resp["access_token"]
        return self._token

    def put_connection(self, conn_id: str, bootstrap_servers: str) -> None:
        """A kafka connection in the metadata DB (REST API), as an operator would create it;
        replaces one of that id (tasks, triggers and the UI plugin read it on each use)."""
        self.request("DELETE", f"/api/v2/connections/{conn_id}", expect=(204, 404))
        self.request("POST", "/api/v2/connections", {
            "connection_id": conn_id, "conn_type": "kafka",
            "extra": json.dumps({"bootstrap.servers": bootstrap_servers})}, expect=(200, 201))

    def wait_for_dag(self, dag_id: str, timeout: float = 180.0) -> dict[str, Any]:
        """Wait until the dag-processor has parsed `dag_id` and the API knows it."""

        def parsed() -> dict[str, Any] | None:
            try:
                return self.request("GET", f"/api/v2/dags/{dag_id}")
            except AirflowApiError as err:
                if err.status == 404:
                    return None
                raise

        dag = self.wait_for(parsed, timeout, f"DAG {dag_id} to be parsed", interval=1.0)
        if dag.get("is_paused"):
            self.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        return dag

    def trigger(self, dag_id: str, conf: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
        """`POST /api/v2/dags/{dag_id}/dagRuns` with a null logical date, as an operator would."""
        body: dict[str, Any] = {"logical_date": None, "conf": conf}
        if run_id:
            body["dag_run_id"] = run_id
        return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 300.0) -> dict[str, Any]:
        """Poll the run until it is success or failed; returns the final run object."""

        def finished() -> dict[str, Any] | None:
            run = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            return run if run["state"] in TERMINAL_RUN_STATES else None

        return self.wait_for(finished, timeout, f"run {run_id} of {dag_id} to finish", interval=1.0)

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
