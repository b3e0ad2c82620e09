"""The built wheel installs into a clean Airflow as a provider: ``airflow providers list``
shows it, and its hook (connection type), notifier and UI plugin are registered.

Slow: it builds the wheel and creates a venv with Airflow (pip's cache makes it minutes, not
more). The pins of requirements.txt constrain what the wheel's own dependencies pull in, so
this also proves the wheel declares everything it needs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.airflow]


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 1500) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def test_wheel_installs_as_an_airflow_provider(tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)])
    wheel = next(dist.glob("kafka_reassign-*.whl"))
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "-c", str(ROOT / "requirements.txt"), str(wheel)])

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "_AIRFLOW"))}
    env.update(AIRFLOW_HOME=str(tmp_path / "airflow_home"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    airflow = str(venv / "bin" / "airflow")
    providers = {p["package_name"]: p for p in json.loads(_run([airflow, "providers", "list", "-o", "json"], env))}
    assert providers["kafka-reassign"]["version"] == "0.1.0"
    hooks = _run([airflow, "providers", "hooks", "-o", "json"], env)
    assert "kafka_reassign_airflow.hooks.kafka_admin.KafkaAdminHook" in hooks
    assert "kafka_reassign_airflow.notifications.KafkaReassignNotifier" in _run(
        [airflow, "providers", "notifications", "-o", "json"], env)
    plugins = [p["name"] for p in json.loads(_run([airflow, "plugins", "-o", "json"], env))]
    assert "kafka_reassign" in plugins
    # The provider's config section is known to Airflow with its defaults.
    assert _run([airflow, "config", "get-value", "kafka_reassign", "kafka_client_log_level"], env).strip() == "WARNING"
