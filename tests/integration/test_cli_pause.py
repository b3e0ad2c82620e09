"""``kafka-reassign pause`` / ``resume`` and ``--window`` on the command line (simulated cluster)."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from integration.test_cli import FAST, GOOD, cluster, write_plan  # noqa: F401  (cluster is a fixture)
from kafka_reassign.cli.main import main
from kafka_reassign.execution.control import RunControl


def test_overlapping_or_bad_windows_exit_2_with_nothing_written(cluster, tmp_path, capsys):
    plan = write_plan(tmp_path, GOOD)
    rc = main(["execute", "--bootstrap-server", cluster.bootstrap_servers, "--plan", plan, *FAST,
               "--record-dir", str(tmp_path / "rec"), "--window", "Mon-Fri 01:00-05:00 Europe/Berlin",
               "--window", "Fri 04:00-06:00 Europe/Berlin", "--window", "daily 02:00-03:00 Nowhere/Land"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "maintenance_windows: window 'daily 02:00-03:00 Nowhere/Land': unknown time zone 'Nowhere/Land'" in err
    assert cluster.write_count == 0
    rc = main(["execute", "--bootstrap-server", cluster.bootstrap_servers, "--plan", plan, *FAST,
               "--record-dir", str(tmp_path / "rec"), "--window", "Mon-Fri 01:00-05:00 Europe/Berlin",
               "--window", "Fri 04:00-06:00 Europe/Berlin"])
    assert rc == 2
    assert "'Mon-Fri 01:00-05:00 Europe/Berlin' and 'Fri 04:00-06:00 Europe/Berlin' overlap" in capsys.readouterr().err
    assert cluster.write_count == 0


def test_pause_needs_a_running_execute(tmp_path, capsys):
    assert main(["pause", "--run-id", "nope", "--record-dir", str(tmp_path)]) == 2
    assert "no running execute nope" in capsys.readouterr().err


def test_a_paused_execute_starts_nothing_until_resumed(cluster, tmp_path, capsys):
    records = tmp_path / "rec"
    control = RunControl(records)
    result: dict[str, Any] = {}

    def execute() -> None:
        result["rc"] = main(["execute", "--bootstrap-server", cluster.bootstrap_servers, "--plan",
                             write_plan(tmp_path, GOOD), *FAST, "--produce-sample-seconds", "0",
                             "--record-dir", str(records), "--run-id", "held"])

    # Paused before it starts (the pause file outlives a restart): it must register and then wait.
    records.mkdir()
    control.request_pause("held")
    runner = threading.Thread(target=execute, daemon=True)
    runner.start()
    deadline = time.monotonic() + 60
    while not control.is_registered("held") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert control.is_registered("held")
    assert main(["pause", "--run-id", "held", "--record-dir", str(records)]) == 0
    time.sleep(2.0)   # many polls at 0.05 s
    assert not any(cluster.partition_state("orders", p)["adding"] for p in (0, 1))
    assert [cluster.partition_state("orders", p)["replicas"] for p in (0, 1)] != [g["replicas"] for g in GOOD]
    assert main(["resume", "--run-id", "held", "--record-dir", str(records)]) == 0
    assert "run held resumed" in capsys.readouterr().out
    runner.join(120)
    assert result.get("rc") == 0
    assert [cluster.partition_state("orders", p)["replicas"] for p in (0, 1)] == [g["replicas"] for g in GOOD]
    assert not Path(records / "pause-held").exists()
