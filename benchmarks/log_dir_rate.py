"""The estimator's KIP-113 log-dir move times against the simulator and, with ``--real``, Apache Kafka 4.3.1.

A replica moved between two dirs of broker 1 (AlterReplicaLogDirs) under
``replica.alter.log.dirs.io.max.bytes.per.second``, of logs written in 0.9 MB batches (what
``kafka_local.load.fill`` writes; ``benchmarks.calibration.FILL_BATCH_BYTES``):

- estimate: ``kafka_reassign.planning.plan_estimate.estimate_plan`` of that one move;
- simulator: ``kafka_sim``'s model in manual time, from the request to the replica in its new dir;
- real (``--real``): ``benchmarks.calibration_timed.log_dir_move`` (scenario c) on a local cluster
  (``KAFKA_LOCAL_DIR`` reuses a running one of 6 brokers, 3 racks, 2 dirs), timed from the cluster's side.

Prints ``size | limit | fluid s | estimate s | simulator s | estimate/simulator [| real s | estimate/real]``.
The simulator's figures are figures about the simulator (calibrated on scenario c).

Run: ``.venv/bin/python -m benchmarks.log_dir_rate [--real 30 60]`` (sizes in MB at 3 MB/s on real Kafka).
"""
from __future__ import annotations

import argparse
import sys
import time

from benchmarks import calibration as cal

MB = cal.MB
#: (size, limit) pairs of the simulator comparison: short copies (inside the quota window) to long ones
CASES = [(30 * MB, 3 * MB), (100 * MB, 3 * MB), (300 * MB, 3 * MB), (1000 * MB, 3 * MB),
         (300 * MB, 10 * MB), (3000 * MB, 10 * MB), (3000 * MB, 50 * MB)]
REAL_LIMIT = 3 * MB
LIMIT_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"


def estimate_seconds(size: int, limit: int) -> float:
    """THE estimator's time for one log-dir move of ``size`` bytes under ``limit``."""
    from kafka_reassign.planning.plan_estimate import PlannedMove, estimate_plan
    move = PlannedMove("calibration", 0, (1, 2, 3), (1, 2, 3), float(size), leader=1,
                       current_dirs=("/data/d0",) * 3, log_dirs=("/data/d1", "any", "any"))
    est, _stalls = estimate_plan([move], rate=None, log_dir_rate=limit)
    return est.seconds


def simulator_seconds(size: int, limit: int, step: float = 0.1) -> float:
    """Simulated seconds from AlterReplicaLogDirs to the replica in its new dir (manual time)."""
    from kafka_sim.model import ClusterModel
    sc = cal.Scenario("log-dir", {0: ((1, 2, 3), (1, 2, 3))}, size, limit)
    model = ClusterModel(cal.sim_snapshot(sc, "calibration"), time_scale=0)
    model.incremental_alter_configs(4, "1", [(LIMIT_CONFIG, 0, str(limit))])  # 4: BROKER, 0: SET
    model.alter_replica_log_dirs(1, [("/data/d1", "calibration", 0)])
    t = 0.0
    while model.partition("calibration", 0).replica(1).log_dir != "/data/d1":
        model.advance_by(step)
        t += step
        if t > 100 * size / limit:
            raise RuntimeError(f"the simulated move of {size} bytes did not finish")
    return t


def real_seconds(sizes_mb: list[int]) -> dict[int, float | None]:
    """Scenario c on a local Kafka cluster for each size (MB) at :data:`REAL_LIMIT`."""
    from benchmarks.calibration_timed import log_dir_move, on_real_timed, Timed
    out: dict[int, float | None] = {}
    stamp = int(time.time())
    with cal.local_kafka() as kafka:
        for mb in sizes_mb:
            sc = cal.Scenario(f"c: log-dir move, {mb} MB", {0: ((1, 2, 3), (1, 2, 3))}, mb * MB, REAL_LIMIT,
                              timeout=60.0 + 2 * mb * MB / REAL_LIMIT, timed=Timed(log_dir_move))
            topic = f"log-dir-rate-{stamp}-{mb}"
            try:
                out[mb * MB] = on_real_timed(kafka, sc, topic, {})
            finally:
                cal._delete_topic(kafka.bootstrap_servers, topic)
            print(f"  real {mb} MB: {out[mb * MB]} s", flush=True)
    return out


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}"


def main(argv: list[str] | None = None) -> int:
    """Print the table (``--real SIZE_MB ...`` adds real Kafka at 3 MB/s)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--real", nargs="*", type=int, default=None, metavar="SIZE_MB")
    args = ap.parse_args(argv or [])
    real = real_seconds(args.real) if args.real else {}
    cases = sorted(set(CASES) | {(size, REAL_LIMIT) for size in real})
    head = "| size MB | limit MB/s | size/limit s | estimate s | simulator s | estimate/simulator |"
    if real:
        head += " real Kafka s | estimate/real |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for size, limit in cases:
        est, sim = estimate_seconds(size, limit), simulator_seconds(size, limit)
        row = (f"| {size / MB:.0f} | {limit / MB:.0f} | {size / limit:.1f} | {est:.1f} | {sim:.1f} | "
               f"{_ratio(est, sim)} |")
        if real:
            got = real.get(size) if limit == REAL_LIMIT else None
            row += f" {'-' if got is None else f'{got:.1f}'} | {_ratio(est, got) if got else '-'} |"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
