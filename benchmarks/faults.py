"""Fault matrix: inject each fault of the README's table into a run against the simulator.

Each scenario starts a fresh simulated cluster (real TCP, the simulator's fault commands
``stop_broker`` / ``start_broker``), sets throttles of "someone else" before the run, runs a
reassignment through the domain loop (:func:`kafka_reassign.run.reassign.run_reassignment`, or
its steps one by one where the fault must land between two of them), injects the fault,
lets the reconciler do its job (:func:`kafka_reassign.throttle.reconciler.reconcile`, as the
``kafka_throttle_reconciler`` DAG does) and then compares every throttle config with what it
should be:

* a *leftover* is a throttle value or replica-list entry of ours still set;
* a *foreign change* is a value of someone else's that is no longer what they set.

``make bench`` prints faults injected, runs, leftovers and foreign changes (goal: 0 and 0).
``tests/integration/test_fault_matrix.py`` runs the same scenarios one test per row and
checks what each run did.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchmarks.fault_env import Env, Outcome
from benchmarks.fault_scenarios import SCENARIOS

__all__ = ["Outcome", "SCENARIOS", "run_scenario"]


def run_scenario(name: str, workdir: Path | None = None) -> Outcome:
    """Run one row of the matrix on a fresh cluster and score it."""
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="faults-")
        workdir = Path(tmp.name)
    env = Env(workdir)
    env.outcome.name = name
    try:
        SCENARIOS[name](env)
        return env.finish()
    finally:
        env.close()
        if tmp is not None:
            tmp.cleanup()


def main() -> int:
    import logging

    logging.disable(logging.CRITICAL)  # the figures, not the runs' logs
    outcomes = []
    for name in SCENARIOS:
        try:
            out = run_scenario(name)
        except Exception as exc:  # noqa: BLE001 - a crashed scenario is a failed benchmark
            print(f"  {name:40s} CRASHED: {type(exc).__name__}: {exc}")
            return 1
        outcomes.append(out)
        print(f"  {name:40s} faults {out.faults}  runs {out.runs}  leftovers {len(out.leftovers)}  "
              f"foreign changes {len(out.foreign)}")
        for line in out.leftovers + out.foreign:
            print(f"      {line}")
    faults = sum(o.faults for o in outcomes)
    runs = sum(o.runs for o in outcomes)
    left = sum(len(o.leftovers) for o in outcomes)
    foreign = sum(len(o.foreign) for o in outcomes)
    print(f"fault matrix: {len(outcomes)} scenarios, {faults} faults injected, {runs} runs; after the reconciler: "
          f"throttle leftovers {left} (goal 0), foreign changes {foreign} (goal 0)")
    return 0 if left == 0 and foreign == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
