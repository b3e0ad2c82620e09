"""Benchmark: ``make demo`` as a user watches it.

Runs the demo (``python -m kafka_reassign_demo``, the Spark planner included) in a fresh
Airflow home and reports, as ratios to their bounds:
- the longest silence: the most wall seconds between two lines of output (bound 10 s);
- the whole demo's wall time (bound 120 s), with the first-use DB migration excluded;
- the moves' time against the least time the throttle allows (from the demo's own report).

Run: ``.venv/bin/python -m benchmarks.demo [--no-planner]``.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SILENCE_BOUND = 10.0
WALL_BOUND = 120.0


def run_demo(extra: list[str]) -> tuple[int, list[tuple[float, str]]]:
    """Run the demo twice in one Airflow home (the first run migrates the DB) and time the second.

    :returns: the second run's exit code and its lines, each with its wall time since the start
    """
    with tempfile.TemporaryDirectory(prefix="demo-bench-") as tmp:
        cmd = [sys.executable, "-u", "-m", "kafka_reassign_demo", "--airflow-home", str(Path(tmp) / "home"), *extra]
        subprocess.run([*cmd, "--dry-run", "--no-planner"], capture_output=True, text=True, timeout=900)
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp)
        lines = [(time.monotonic() - t0, line.rstrip("\n")) for line in proc.stdout]
        lines.append((time.monotonic() - t0, "<exit>"))
        return proc.wait(), lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-planner", action="store_true", help="the demo's built-in plan instead of Spark")
    args = ap.parse_args(argv)
    rc, lines = run_demo(["--no-planner"] if args.no_planner else [])
    gaps = [(b[0] - a[0], b[1]) for a, b in zip([(0.0, "<start>"), *lines], lines)]
    silence, before = max(gaps)
    wall = lines[-1][0]
    text = "\n".join(line for _, line in lines)
    ratio = re.search(r"the run took ([\d.]+)x that bound", text)
    free = re.search(r"The source-free bound .*: ([\d.]+)x\.", text)
    print(f"demo exit code {rc}")
    print(f"longest silence   {silence:6.1f} s  bound {SILENCE_BOUND:.0f} s  ratio {silence / SILENCE_BOUND:.2f}"
          f"  (before: {before[:70]!r})")
    print(f"wall time         {wall:6.1f} s  bound {WALL_BOUND:.0f} s  ratio {wall / WALL_BOUND:.2f}")
    print(f"moves vs throttle bound  ratio {ratio.group(1) if ratio else 'n/a'} (fixed leaders), "
          f"{free.group(1) if free else 'n/a'} (source-free)")
    if rc != 0:
        print(text[-3000:])
    return rc


if __name__ == "__main__":
    sys.exit(main())
