"""``make demo`` as a first-time user sees it: a good run narrates, ends with the proof, and
shows no alarming warnings. Run from outside the repository: it needs no repository layout
beyond the DAGs folder."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.airflow]


def test_demo_narrates_restores_throttles_and_shows_no_warnings(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "kafka_reassign_demo", "--no-planner",
                           "--airflow-home", str(tmp_path / "home")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    narration = re.findall(r"^\[\s*\d+ s\] (.*)$", proc.stdout, flags=re.M)
    assert any(line.startswith("Running the kafka_reassign DAG") for line in narration), narration
    assert "Throttles back to their prior values (the operator's own included): YES" in proc.stdout
    assert re.search(r"What moved \(\d+ partition\(s\)", proc.stdout)
    assert re.search(r"The throttle bound \(60\.0 MB/s per broker; .*\) is \S+ simulated: "
                     r"the run took [\d.]+x that bound", proc.stdout)
    assert re.search(r"Estimated before the run \(prepare\): \S+; the moves took \S+, [+-]\d+% against it",
                     proc.stdout)
    assert any(line.startswith("moving: ") and "steps done" in line for line in narration), narration
    assert f"AIRFLOW_HOME={tmp_path / 'home'}" in proc.stdout and "/dags/kafka_reassign" in proc.stdout
    alarming = [ln for ln in out.splitlines() if re.search(r"warning|error|traceback", ln, flags=re.I)]
    assert alarming == []
