"""The demo's Airflow: its own AIRFLOW_HOME (SQLite, the repository's DAGs, no examples)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kafka_reassign_demo.narration import Narrator, say


def find_dags_folder(given: str | None) -> Path:
    """The folder holding ``kafka_reassign_dag.py``: ``--dags-folder``, else the checkout's ``dags/``.

    :param given: the ``--dags-folder`` value, if any
    :raises SystemExit: naming what to pass when neither exists
    """
    candidates = [Path(given)] if given else [Path(__file__).resolve().parents[2] / "dags", Path.cwd() / "dags"]
    for folder in candidates:
        if (folder / "kafka_reassign_dag.py").is_file():
            return folder.resolve()
    raise SystemExit(f"demo: no kafka_reassign_dag.py in {', '.join(map(str, candidates))}; "
                     "pass --dags-folder DIR (the repository's dags/)")


def prepare_airflow_home(home: Path, dags: Path) -> None:
    """Point Airflow at ``home`` (SQLite, ``dags``, no examples) and migrate the DB once.

    The settings also go to ``home/airflow.cfg``, so ``AIRFLOW_HOME=<home> airflow api-server``
    shows the demo's runs afterwards.

    :param home: the AIRFLOW_HOME to use (created)
    :param dags: the DAGs folder
    """
    home.mkdir(parents=True, exist_ok=True)
    settings = {
        ("core", "dags_folder"): str(dags), ("core", "load_examples"): "False",
        ("core", "simple_auth_manager_all_admins"): "True",
        ("database", "sql_alchemy_conn"): f"sqlite:///{home}/airflow.db",
        ("logging", "logging_level"): os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING"),
    }
    os.environ["AIRFLOW_HOME"] = str(home)
    for (section, key), value in settings.items():
        os.environ[f"AIRFLOW__{section.upper()}__{key.upper()}"] = value
    cfg = "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for (s2, k), v in settings.items() if s2 == s) + "\n"
                  for s in dict.fromkeys(s for s, _ in settings))
    (home / "airflow.cfg").write_text(cfg, encoding="utf-8")
    marker = home / ".migrated"
    if not marker.exists():
        say(f"Preparing the Airflow metadata DB in {home} (airflow db migrate, once; about 20 s) ...")
        airflow_bin = Path(sys.executable).parent / "airflow"
        narrator = Narrator(lambda: "still migrating the Airflow metadata DB ...")
        narrator.start()
        try:
            subprocess.run([str(airflow_bin), "db", "migrate"], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=900)
        finally:
            narrator.stop()
        marker.write_text("ok\n")
