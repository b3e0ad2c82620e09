"""Airflow set-up for the DAG tests: a session AIRFLOW_HOME (SQLite, dags/, no examples).

The environment is set at import time, before any test module imports airflow.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated metadata DB for the session (copied from a cached template)."""
    return airflow_env.migrate_once()
