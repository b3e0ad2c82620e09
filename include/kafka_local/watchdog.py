"""Kills a local cluster's JVMs when the process that owns it is gone.

``up`` with an owner (the test run, a benchmark) starts this in its own session. If the owner
ends without calling ``down`` (SIGKILL, a CI timeout), no broker JVM outlives it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from kafka_local.jvm import alive, kill_all


def watch(directory: Path, owner: int, cluster_id: str, period: float = 0.5) -> int:
    """Wait until ``owner`` dies or the cluster's state is lost (kill it), or it is brought down."""
    state = directory / "cluster.json"
    while True:
        try:
            data = json.loads(state.read_text())
        except (OSError, ValueError):
            data = None  # being rewritten, or gone: look again before acting
            time.sleep(period)
            if not state.exists():
                kill_all(directory)
                return 0
            continue
        if data.get("down") or data.get("cluster_id") != cluster_id:
            return 0
        if not alive(owner):
            kill_all(directory)
            return 0
        time.sleep(period)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafka_local.watchdog")
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--owner", required=True, type=int)
    parser.add_argument("--cluster-id", required=True)
    args = parser.parse_args(argv)
    return watch(args.dir.resolve(), args.owner, args.cluster_id)


if __name__ == "__main__":
    sys.exit(main())
