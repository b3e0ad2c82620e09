"""The README's commands run as written: the simulated-cluster walk-through verbatim, and the
real-cluster steps against a simulated cluster (only the address and the sampling time
substituted). ``make`` targets are left to the Makefile's own use."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from kafka_reassign import defaults as D
from kafka_reassign.units import format_rate

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.slow


def bash_blocks(heading: str) -> list[str]:
    """The ```bash blocks of the README section whose heading starts with ``heading``."""
    start = README.index(f"\n## {heading}")
    end = README.find("\n## ", start + 1)
    return re.findall(r"```bash\n(.*?)```", README[start:end if end > 0 else None], flags=re.S)


def run_bash(script: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_REASSIGN", "VIRTUAL_ENV"))}
    env["KAFKA_REASSIGN_RECORD_DIR"] = str(cwd / "records")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{script}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory that looks like the repository root after ``make setup`` (its .venv)."""
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    return tmp_path


def test_path_section_commands_run(checkout: Path) -> None:
    (block,) = bash_blocks("Put the tools on your PATH")
    lines = [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("make ")]
    out = run_bash("\n".join(lines), checkout).stdout
    assert "usage: kafka-reassign" in out and "usage: kafka-sim" in out and "usage: kafka-local" in out


def test_simulated_cluster_walkthrough_runs_verbatim(checkout: Path) -> None:
    (block,) = bash_blocks("Try it on a simulated cluster")
    proc = run_bash("source .venv/bin/activate\n" + block, checkout)
    assert "plan OK" in proc.stdout and "throttles restored" in proc.stdout, proc.stdout[-3000:]
    assert "0 reassignment(s) in progress" in proc.stdout
    assert "No replication throttle configs set." in proc.stdout
    assert json.loads((checkout / "try" / "plan.json").read_text())["partitions"]


def test_real_cluster_steps_run_against_a_simulated_cluster(checkout: Path, sim_cluster) -> None:
    from kafka_reassign_demo import load_scenario

    cluster = sim_cluster(load_scenario(), time_scale=50.0)   # skewed: the rebalance has work to do
    connection, dry_run, first_run = bash_blocks("Against a real cluster")
    assert "--command-config" in README and "export BOOTSTRAP=" in connection
    script = "\n".join([
        connection.replace(re.search(r"export BOOTSTRAP=\S+", connection).group(0),
                           f"export BOOTSTRAP={cluster.bootstrap_servers}"),
        dry_run.replace("--sample-seconds 60", "--sample-seconds 1"),
        first_run.replace("--throttle 20MB/s", "--throttle 20MB/s --poll-interval-seconds 1"),
    ])
    proc = run_bash("source .venv/bin/activate\n" + script, checkout)
    assert "plan OK" in proc.stdout and "throttles restored" in proc.stdout
    assert (checkout / "client.properties").read_text().startswith("security.protocol=SASL_SSL")


def test_defaults_table_matches_kafka_reassign_defaults() -> None:
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([^|]+?) \| `--", README, flags=re.M))
    assert rows == {
        "Replication throttle": f"{format_rate(D.THROTTLE_BYTES_PER_SEC).replace('.0 ', ' ')} per broker",
        "Partition moves in flight, whole cluster": str(D.MAX_PARTITION_MOVEMENTS),
        "Moves in flight per broker (in, out or leader copying)": str(D.MAX_MOVEMENTS_PER_BROKER),
        "Leader movements at once": str(D.MAX_LEADER_MOVEMENTS),
        "Adapt the caps to ISR health": "on" if D.ADAPTIVE_CONCURRENCY else "off",
        "Adaptive floor, moves per broker": str(D.MIN_MOVEMENTS_PER_BROKER),
        "Move timeout": f"{D.MOVE_TIMEOUT_MINUTES:g} min",
        "Stall window (bytes left not falling)": f"{D.STALL_WINDOW_SECONDS / 60:g} min",
        "Progress poll interval": f"{D.POLL_INTERVAL_SECONDS:g} s",
        "Which moves start first": D.MOVEMENT_STRATEGY,
        "Cancel this run's moves on failure": "on" if D.CANCEL_ON_FAILURE else "off",
        "Copy from the least busy in-sync replica": "on" if D.LEADER_SOURCING else "off",
        "Adaptive throttle": "on" if D.ADAPTIVE_THROTTLE else "off",
        "Adaptive throttle floor": f"{format_rate(D.THROTTLE_MIN_BYTES_PER_SEC).replace('.0 ', ' ')} per broker",
        "Adaptive throttle ceiling": f"{format_rate(D.THROTTLE_MAX_BYTES_PER_SEC).replace('.0 ', ' ')} per broker",
    }
