"""The one set of run defaults: the CLI, the DAG params, :class:`~kafka_reassign.planning.validate.ReassignParams`
and the README all take their defaults from here (a test compares the CLI's and the DAG's).

The movement limits follow Cruise Control's executor defaults, so an operator who knows Cruise
Control finds what they expect: 1250 partition movements in the whole cluster
(``max.num.cluster.partition.movements``), 1000 leader movements
(``num.concurrent.leader.movements``) and a progress check every 10 s
(``execution.progress.check.interval.ms``). Per broker it allows 20 moves, not Cruise
Control's 5 (``num.concurrent.partition.movements.per.broker``): see
:data:`MAX_MOVEMENTS_PER_BROKER`. Cruise Control moves unthrottled by default; this
tool always throttles unless told not to (KIP-73), at 50 MB/s per broker, which a 1 Gbit/s
link carries next to client traffic.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

#: KIP-73 leader and follower replication throttle set on every broker that sends or receives.
THROTTLE_BYTES_PER_SEC: int = 50_000_000
#: replica.alter.log.dirs.io.max.bytes.per.second for moves between disks; None = the throttle.
LOG_DIR_THROTTLE_BYTES_PER_SEC: int | None = None
#: KIP-435 steps in flight at once in the whole cluster.
MAX_PARTITION_MOVEMENTS: int = 1250
#: Moves at once that add a replica to, remove one from, or copy from (as leader) any one
#: broker. Each broker's in and out bandwidth is capped by the throttle whatever this is; the
#: cap decides how well it is used. A move's speed is the smaller of its leader's and its new
#: replica's share of their throttles, so with few moves per broker most brokers wait on
#: someone else's share: rehearsing 2,000 moves on 60 brokers (``benchmarks/rehearsal.py``,
#: largest-first) took 1.36x the throttle bound at 5, 1.16x at 10 and 1.02x at 20.
MAX_MOVEMENTS_PER_BROKER: int = 20
#: Partitions whose preferred leader changes at once.
MAX_LEADER_MOVEMENTS: int = 1000
#: A move not finished after this long fails the run. Generous: a 500 GB partition takes
#: about 3 h at 50 MB/s, so size it to the largest partition; the stall window catches a
#: move that makes no progress much sooner.
BATCH_TIMEOUT_MINUTES: float = 120.0
#: How often progress (reassignments, ISR, lag) is read from the cluster.
POLL_INTERVAL_SECONDS: float = 10.0
#: Bytes left not falling for this long = stalled (a throttle below the produce rate).
STALL_WINDOW_SECONDS: float = 600.0
#: Revert this run's in-flight moves when the run fails, before the throttle is removed.
CANCEL_ON_FAILURE: bool = True
#: Validate and print what would be done, write nothing.
DRY_RUN: bool = False
#: Start moves the pre-flight finds would never catch up at the throttle (produce rate and
#: in-sync replication above it): off, such a run is refused before any write.
ALLOW_STALLING_MOVES: bool = False
#: Window over which the moving partitions' produce rates are measured before a run
#: (log-end offsets and leader log growth sampled twice); 0 = do not measure.
PRODUCE_SAMPLE_SECONDS: float = 3.0
#: Before the run, rehearse it on a simulated copy of the cluster (seeded from a snapshot read
#: now) with the same limits; its predicted moving time becomes the run's estimate.
REHEARSE: bool = False
#: Order in which the executor starts moves (Cruise Control's replica movement strategies):
#: one name, or several separated by commas (the first decides, the next break ties).
MOVEMENT_STRATEGIES: tuple[str, ...] = ("busiest-brokers", "largest-first", "smallest-first", "postpone-urp")
#: Largest first: a big partition started late is the tail of the run. Rehearsing 60-broker
#: plans at 20 moves per broker (``benchmarks/rehearsal.py``), largest-first took 1.02x / 1.04x /
#: 1.17x the throttle bound at 2k / 4k / 20k moves, busiest-brokers 1.09x / 1.13x / 1.46x; on the
#: 6-broker executor benchmark both take 0.99x.
MOVEMENT_STRATEGY: str = "largest-first"
#: Give up reaching the cluster after this long.
CONNECT_TIMEOUT_SECONDS: float = 10.0

#: Every run parameter of the domain layer (``validate_params`` names) with its default.
RUN_DEFAULTS: dict[str, Any] = {
    "throttle_bytes_per_sec": THROTTLE_BYTES_PER_SEC,
    "log_dir_throttle_bytes_per_sec": LOG_DIR_THROTTLE_BYTES_PER_SEC,
    "max_partition_movements": MAX_PARTITION_MOVEMENTS,
    "max_movements_per_broker": MAX_MOVEMENTS_PER_BROKER,
    "max_leader_movements": MAX_LEADER_MOVEMENTS,
    "batch_timeout_minutes": BATCH_TIMEOUT_MINUTES,
    "allow_rf_change": False,
    "allow_internal_topics": False,
    "dry_run": DRY_RUN,
    "cancel_on_failure": CANCEL_ON_FAILURE,
    "stall_window_seconds": STALL_WINDOW_SECONDS,
    "poll_interval_seconds": POLL_INTERVAL_SECONDS,
    "allow_stalling_moves": ALLOW_STALLING_MOVES,
    "produce_sample_seconds": PRODUCE_SAMPLE_SECONDS,
    "rehearse": REHEARSE,
    "movement_strategy": MOVEMENT_STRATEGY,
}


def add_movement_arguments(parser: "argparse.ArgumentParser", *, purpose: str = "") -> None:
    """The throttle and movement-limit options, with these defaults, for a command line.

    Values land in the run parameters' names (``args.throttle_bytes_per_sec`` ...).

    :param parser: the (sub)command's parser
    :param purpose: appended to the throttle's help, e.g. "for the time estimate"
    """
    from kafka_reassign.units import format_rate, rate_argument

    parser.add_argument("--throttle", type=rate_argument, default=THROTTLE_BYTES_PER_SEC,
                        dest="throttle_bytes_per_sec", metavar="RATE",
                        help=f"replication throttle per broker{purpose}: 50MB/s, 10MiB/s or bytes/s "
                             f"(default {format_rate(THROTTLE_BYTES_PER_SEC)})")
    parser.add_argument("--log-dir-throttle", type=rate_argument, default=LOG_DIR_THROTTLE_BYTES_PER_SEC,
                        dest="log_dir_throttle_bytes_per_sec", metavar="RATE",
                        help="throttle for moves between log dirs of one broker (default: --throttle)")
    parser.add_argument("--max-partition-movements", type=int, default=MAX_PARTITION_MOVEMENTS,
                        help=f"partition moves in flight in the whole cluster (default {MAX_PARTITION_MOVEMENTS})")
    parser.add_argument("--max-movements-per-broker", type=int, default=MAX_MOVEMENTS_PER_BROKER,
                        help=f"moves at once adding to, removing from or copying from one broker "
                             f"(default {MAX_MOVEMENTS_PER_BROKER})")
    parser.add_argument("--max-leader-movements", type=int, default=MAX_LEADER_MOVEMENTS,
                        help=f"preferred-leader changes at once (default {MAX_LEADER_MOVEMENTS})")
    parser.add_argument("--strategy", default=MOVEMENT_STRATEGY, dest="movement_strategy",
                        help=f"order of the moves: {', '.join(MOVEMENT_STRATEGIES)}, or several separated by "
                             f"commas (the first decides, the next break ties; default {MOVEMENT_STRATEGY})")
