"""The one table of run parameters: name, type, default, bounds, unit, help, and where each shows.

Everything else is derived from :data:`RUN_PARAMS`: the validated
:class:`~kafka_reassign.planning.validate.ReassignParams` and its checks, the CLI's run flags
(:func:`add_run_arguments`), the DAG params and their JSON schema (``kafka_reassign_airflow.params``), the
executor's :class:`ExecutionLimits` defaults, the planner's limit flags (:data:`PLANNER_LIMITS`) and the
README's defaults table (:func:`readme_defaults_table`; a unit test compares it with README.md). Adding a
parameter is adding a row (and its typed field on ``ReassignParams``, which a test checks against the rows).

The movement limits follow Cruise Control's executor defaults, so an operator who knows Cruise Control finds
what they expect: 1250 partition movements in the whole cluster (``max.num.cluster.partition.movements``),
1000 leader movements (``num.concurrent.leader.movements``) and a progress check every 10 s
(``execution.progress.check.interval.ms``). Per broker it allows up to 100 moves, not Cruise Control's 5
(``num.concurrent.partition.movements.per.broker``), because what a broker has in flight is measured in bytes
first (two polls of the throttle): see :data:`MAX_MOVEMENTS_PER_BROKER`. Cruise Control moves unthrottled by
default; this tool always throttles unless told not to (KIP-73), at 50 MB/s per broker, which a 1 Gbit/s link
carries next to client traffic.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from kafka_reassign.param_rows import CliFlag, DagField, ParamValue, RunParam
from kafka_reassign.planning.goal_order import BALANCE_GOALS, DEFAULT_BALANCE_GOALS

if TYPE_CHECKING:
    import argparse


#: Kafka's INT32 fields (partition and movement counts) hold at most this.
INT_MAX = 2**31 - 1
#: KIP-179: a replication throttle "should be at least 1 KB/s".
MIN_THROTTLE_BYTES_PER_SEC: int = 1024
#: Order in which the executor starts moves (Cruise Control's replica movement strategies):
#: one name, or several separated by commas (the first decides, the next break ties).
MOVEMENT_STRATEGIES: tuple[str, ...] = ("busiest-brokers", "largest-first", "smallest-first", "postpone-urp")
#: Give up reaching the cluster after this long (a connection setting, not a run parameter).
CONNECT_TIMEOUT_SECONDS: float = 10.0

#: Sections of the DAG trigger form.
WHAT, HOW, SAFETY = "What to move", "How fast and how much at once", "Safety"


RUN_PARAMS: tuple[RunParam, ...] = (
    RunParam(
        "allow_rf_change", bool, False, "accept replication-factor changes",
        cli=CliFlag("--allow-rf-change"),
        dag=DagField("Allow replication factor changes", SAFETY, name="allow_replication_factor_change",
                     description="A plan that changes a partition's number of replicas is refused unless this "
                                 "is on (or the goal is replication-factor): a typo should not drop a replica.")),
    RunParam(
        "allow_internal_topics", bool, False, "accept moves of internal topics",
        cli=CliFlag("--allow-internal-topics"),
        dag=DagField("Allow internal topics", SAFETY,
                     description="Moving replicas of __consumer_offsets or __transaction_state is refused "
                                 "unless this is on.")),
    RunParam(
        # KIP-73 leader and follower replication throttle set on every broker that sends or receives.
        "throttle_bytes_per_sec", int, 50_000_000, "replication throttle per broker",
        minimum=MIN_THROTTLE_BYTES_PER_SEC, nullable=True, unit="bytes/s", planner=True,
        cli=CliFlag("--throttle", metavar="RATE", off_flag="--no-throttle",
                    off_help="do not throttle (not recommended)"),
        dag=DagField("Replication throttle (bytes/s)", HOW, refuse_null=True,
                     description="KIP-73 replication throttle set on every broker that sends or receives a "
                                 "replica (leader and follower rates). It must be above the produce rate of "
                                 "the moving partitions or they never catch up."),
        readme="Replication throttle"),
    RunParam(
        "log_dir_throttle_bytes_per_sec", int, None,
        "throttle for moves between log dirs of one broker (default: --throttle)",
        minimum=MIN_THROTTLE_BYTES_PER_SEC, nullable=True, unit="bytes/s", planner=True,
        cli=CliFlag("--log-dir-throttle", metavar="RATE"),
        dag=DagField("Log-dir move throttle (bytes/s)", HOW,
                     description="replica.alter.log.dirs.io.max.bytes.per.second for moves between disks of "
                                 "one broker (KIP-113: plan entries with log_dirs), on those brokers only; a "
                                 "plan may mix them with broker moves. Null = same as the replication throttle.")),
    RunParam(
        # Off by default: it writes broker configs during the run (recorded, restored like the first).
        "adaptive_throttle", bool, False,
        "each poll, set each broker's throttle to its link capacity less its client traffic, within the bounds",
        cli=CliFlag("--adaptive-throttle"),
        dag=DagField("Adaptive throttle", HOW, description=(
            "Each execute-task wake (at least once a minute), a broker with moves gets capacity minus its "
            "client traffic (produce in, in-sync "
            "replication in and out, from log growth; consumer fetch is not measured), clamped to the "
            "bounds; changed only when it moves by >10% or hits a bound. The replication throttle is "
            "the starting rate.")), readme="Adaptive throttle"),
    RunParam("throttle_min_bytes_per_sec", int, 10_000_000, "adaptive throttle's floor (raised to the "
             "pre-flight stall point)", minimum=MIN_THROTTLE_BYTES_PER_SEC, unit="bytes/s",
             cli=CliFlag("--throttle-min", metavar="RATE"), readme="Adaptive throttle floor",
             dag=DagField("Adaptive throttle floor (bytes/s)", HOW, description="Never below this, nor below "
                          "the rate at which moves would stall (raised to it, with a note).")),
    RunParam("throttle_max_bytes_per_sec", int, 100_000_000, "adaptive throttle's ceiling",
             minimum=MIN_THROTTLE_BYTES_PER_SEC, unit="bytes/s", cli=CliFlag("--throttle-max", metavar="RATE"),
             dag=DagField("Adaptive throttle ceiling (bytes/s)", HOW, description="Never above this."),
             readme="Adaptive throttle ceiling"),
    RunParam("broker_network_capacity_bytes_per_sec", int, None, "a broker's link capacity for the adaptive "
             "throttle (less your peak consumer traffic) and the planner's network-capacity goal",
             minimum=MIN_THROTTLE_BYTES_PER_SEC, nullable=True, planner=True,
             unit="bytes/s", cli=CliFlag("--broker-network-capacity", metavar="RATE"),
             dag=DagField("Broker network capacity (bytes/s)", HOW, description="Needed by the adaptive "
                          "throttle: bytes/s one broker's link carries, less the consumer traffic it "
                          "serves at peak. The planner keeps every broker's network in and out under "
                          "network_capacity_ceiling (0.8) of it (goal network-capacity).")),
    RunParam("broker_network_capacities", tuple, (), "a broker's own link capacity for the adaptive throttle "
             "and the planner, BROKER=RATE (repeat the flag; others: --broker-network-capacity)", planner=True,
             cli=CliFlag("--broker-network-capacity-of", metavar="BROKER=RATE"),
             dag=DagField("Network capacity per broker", HOW, description='Brokers whose link differs, e.g. '
                          '"3=50MB/s" (others: the broker network capacity).')),
    RunParam(
        # Only the disk-threshold goal reads it; a run param so the DAG form, the CLI and the
        # planner flags all take it from this row.
        "disk_threshold_percent", float, None,
        "disk-threshold goal: every log dir ends at most this percentage of its capacity",
        minimum=0, exclusive_minimum=True, maximum=100, nullable=True, unit="%", planner=True,
        cli=CliFlag("--disk-threshold-percent", metavar="PERCENT"),
        dag=DagField("Disk threshold (% of a log dir)", WHAT,
                     description="For the goal disk-threshold: move replicas off every log dir above this "
                                 "percentage of its capacity, the least data possible, until it is under; "
                                 "dirs already under it only receive (and stay under it).")),
    RunParam(
        # The balancing plans' goals (planning/goal_order.py): a row so the DAG form, the CLI and
        # the planner flags all take it from here; the default is every goal (as Cruise Control).
        "balance_goals", tuple, DEFAULT_BALANCE_GOALS,
        "balance goals, highest priority first (repeat the flag or give a comma list; hard goals first): "
        + ", ".join(g.name for g in BALANCE_GOALS), planner=True,
        cli=CliFlag("--balance-goal", metavar="GOAL"),
        dag=DagField("Balance goals (priority order)", WHAT, description=(
            "What rebalance, add-brokers and remove-brokers even out, highest priority first: hard goals "
            "(rack-aware, capacity, network-capacity, replica-capacity: always kept) then distribution goals (disk, network-in, topic-spread, "
            "leader-count, leader-bytes-in, network-out), each within its tolerance. A lower goal never pushes a higher one out of "
            "its tolerance; a goal left out is off (disk must stay)."))),
    RunParam(  # the replica-capacity goal (planning/spark/replica_capacity.py): off unless given
        "max_replicas_per_broker", int, None, "no broker is pushed above this many replicas (goal "
        "replica-capacity; none: no cap)", minimum=1, maximum=INT_MAX, nullable=True, planner=True,
        cli=CliFlag("--max-replicas-per-broker", metavar="N"),
        dag=DagField("Max replicas per broker", WHAT, description=(
            "Cruise Control's max.replicas.per.broker: no plan moves a replica onto a broker that holds "
            "this many; more replicas than the brokers may hold is refused. Empty: no cap."))),
    RunParam(  # network out (goal network-out, the summary's balance) where consumers were not measured
        "consumer_fanout", float, 1.0, "consumer groups reading each partition, for network out, used where "
        "the snapshot has no measured consumer bytes (0: none)",
        minimum=0, planner=True, cli=CliFlag("--consumer-fanout", metavar="GROUPS"),
        dag=DagField("Consumer fan-out", WHAT, description=(
            "How many consumer groups read each partition (1.0: one group reads everything), used where "
            "the snapshot has no measured consumer bytes (consumer_bytes_per_sec). A broker's network out is "
            "what it leads times its followers plus what consumers read; the network-out goal evens it."))),
    RunParam(  # a planning input, read by the snapshot (cluster/capacities.py)
        "log_dir_capacity_bytes", tuple, (),
        "log dir capacity for the planner instead of the volume size brokers report: SIZE (every dir), "
        "BROKER=SIZE or BROKER:LOG_DIR=SIZE (repeat the flag)",
        cli=CliFlag("--log-dir-capacity", metavar="[BROKER[:DIR]=]SIZE", snapshot_only=True),
        dag=DagField("Log dir capacities", WHAT, description=(
            'Capacities the planner uses instead of the volume sizes brokers report (KIP-827), e.g. '
            '"2TB" (every log dir), "3=500GB" (each dir of broker 3), "3:/data/d1=500GB" (one dir); '
            "the most specific wins. Empty: as reported. A broker or dir the cluster lacks fails the "
            "snapshot task."))),
    RunParam(
        "max_partition_movements", int, 1250, "partition moves (KIP-435 steps) in flight in the whole cluster",
        minimum=1, maximum=INT_MAX, planner=True, cli=CliFlag("--max-partition-movements"),
        dag=DagField("Partition moves at once", HOW,
                     description="At most this many partition moves (KIP-435 steps) in flight at once in the "
                                 "whole cluster (Cruise Control's max.num.cluster.partition.movements)."),
        readme="Partition moves in flight, whole cluster"),
    RunParam(
        # A ceiling: the window admits a step only while a broker it crosses has less than two polls
        # of the throttle in flight (execution/window.py), so large moves stay few per broker
        # whatever this is. It binds on many small moves: 3,000 partitions of 1-10 MB, brokers 1-3
        # to 4-6 at 25 MB/s (benchmarks/executor.py, simulator) took 1.73x the throttle bound at 20
        # and 1.18x at 100, each small step over before the next wake.
        "max_movements_per_broker", int, 100, "moves at once adding to, removing from or copying from one broker",
        minimum=1, maximum=INT_MAX, planner=True, cli=CliFlag("--max-movements-per-broker"),
        dag=DagField("Moves per broker at once", HOW,
                     description="At most this many moves at once that add a replica to, remove one from, or "
                                 "copy from (as the leader) any one broker (Cruise Control's "
                                 "num.concurrent.partition.movements.per.broker). A ceiling: a broker takes new "
                                 "moves only while it has less than two polls of the throttle in flight, so "
                                 "large moves stay few whatever this is."),
        readme="Moves in flight per broker (in, out or leader copying)"),
    RunParam(
        "max_leader_movements", int, 1000, "preferred-leader changes at once",
        minimum=1, maximum=INT_MAX, planner=True, cli=CliFlag("--max-leader-movements"),
        dag=DagField("Leader movements at once", HOW,
                     description="Cap on partitions whose preferred leader changes at once (Cruise Control's "
                                 "num.concurrent.leader.movements)."),
        readme="Leader movements at once"),
    RunParam(
        # On by default: it changes a cap only when a partition in flight lost an in-sync replica
        # (at or under min ISR, or a follower out of the ISR), which a healthy run never sees, so it
        # never slows one; what it costs is one Metadata read of the moving topics every 30 s.
        "adaptive_concurrency", bool, True,
        "keep the caps fixed (default: halve the caps of brokers whose moving partitions lose in-sync "
        "replicas, grow them back once healthy)",
        cli=CliFlag("--no-adaptive-concurrency"),
        dag=DagField("Adapt moves at once to ISR health", SAFETY,
                     description="Like Cruise Control's concurrency adjuster: when a moving partition falls to "
                                 "min.insync.replicas or a follower leaves the ISR, the brokers involved get "
                                 "half their moves at once (not below the floor); the caps grow back step by "
                                 "step once healthy. Every change is logged with its reason."),
        readme="Adapt the caps to ISR health"),
    RunParam(
        "min_movements_per_broker", int, 2,
        "floor of the per-broker cap when adaptive concurrency shrinks it",
        minimum=1, maximum=INT_MAX, cli=CliFlag("--min-movements-per-broker"),
        dag=DagField("Fewest moves per broker (adaptive floor)", SAFETY,
                     description="Adaptive concurrency never lowers a broker's (or the cluster's) moves at once "
                                 "below this. At most 'Moves per broker at once'."),
        readme="Adaptive floor, moves per broker",
        readme_note=" (clamped to the per-broker cap when not given)"),
    RunParam(
        # Generous: a 500 GB partition takes about 3 h at 50 MB/s, so size it to the largest
        # partition; the stall window catches a move that makes no progress much sooner.
        "move_timeout_minutes", float, 120.0, "fail a move (KIP-435 step) not done this long after its submission",
        minimum=0, exclusive_minimum=True, unit="min", old_name="batch_timeout_minutes",
        cli=CliFlag("--move-timeout-minutes", metavar="MINUTES"),
        dag=DagField("Move timeout (minutes)", SAFETY,
                     description="A move (KIP-435 step) not finished this long after its submission fails the "
                                 "run (then cancel_on_failure and the throttle removal apply)."),
        readme="Move timeout"),
    RunParam(
        "poll_interval_seconds", float, 10.0, "how often progress (sizes, lag, log dirs) is read in full",
        minimum=0, exclusive_minimum=True, unit="s", cli=CliFlag("--poll-interval-seconds", metavar="SECONDS"),
        dag=DagField("Progress poll interval (seconds)", HOW,
                     description="How often the execute task's trigger reads the moves in flight in full (sizes, "
                                 "lag, log dirs, stall clocks). A finished move is seen sooner: the trigger knows "
                                 "when each move is due and checks the reassignment listing then (at most once a "
                                 "second). The window keeps two polls (at least 10 s) of the throttle in flight "
                                 "per broker."),
        readme="Progress poll interval"),
    RunParam(
        "stall_window_seconds", float, 600.0, "fail when bytes left do not fall for this long",
        minimum=0, exclusive_minimum=True, unit="s", cli=CliFlag("--stall-window-seconds", metavar="SECONDS"),
        dag=DagField("Stall window (minutes)", SAFETY, name="stall_window_minutes", per_domain_unit=60.0,
                     description="Fail a move when its bytes left have not fallen for this long (KIP-73: a "
                                 "throttle below the produce rate never catches up), or when a broker it needs "
                                 "has been offline this long (shorter outages are waited out)."),
        readme="Stall window (bytes left not falling)"),
    RunParam(
        "dry_run", bool, False, "validate and print the steps and config changes only",
        cli=CliFlag("--dry-run", execute_only=True),
        dag=DagField("Dry run", SAFETY,
                     description="Validate, print the plan, the steps and the exact config changes, and "
                                 "stop without writing anything to the cluster.")),
    RunParam(
        "cancel_on_failure", bool, True,
        "leave in-flight moves running when the run fails (default: cancel ours)",
        cli=CliFlag("--no-cancel-on-failure", execute_only=True),
        dag=DagField("Cancel on failure", SAFETY,
                     description="When a move fails, cancel (revert) this run's in-flight moves before the "
                                 "throttle is removed. Off: moves keep going, unthrottled."),
        readme="Cancel this run's moves on failure"),
    RunParam(
        "allow_stalling_moves", bool, False,
        "start moves the pre-flight finds would never catch up at this throttle (default: refuse)",
        cli=CliFlag("--allow-stalling-moves"),
        dag=DagField("Allow moves that would stall", SAFETY,
                     description="The pre-flight refuses a run when a moving partition's produce rate plus the "
                                 "in-sync replication Kafka counts in the throttle exceed it (the new replica "
                                 "would never catch up and the partition stays under-replicated). On: start "
                                 "such moves anyway.")),
    RunParam(
        "produce_sample_seconds", float, 3.0,
        "measure the moving partitions' produce rates over this window before the run "
        "(0 = use --snapshot rates or skip the stall check)",
        minimum=0, unit="s", cli=CliFlag("--produce-sample-seconds", metavar="SECONDS"),
        dag=DagField("Produce-rate sampling (seconds)", HOW,
                     description="Before the run, the moving partitions' produce rates are measured over this "
                                 "window (log-end offsets and leader log growth) for the stall check and the "
                                 "estimate. 0 = do not measure (the stall check is skipped).")),
    RunParam(
        # Largest first: a big partition started late is the tail of the run. Rehearsing 60-broker
        # plans at 20 moves per broker (benchmarks/rehearsal.py), largest-first took 1.02x / 1.04x /
        # 1.17x the throttle bound at 2k / 4k / 20k moves, busiest-brokers 1.09x / 1.13x / 1.46x;
        # on the 6-broker executor benchmark both take 0.99x.
        "movement_strategy", str, "largest-first",
        f"order of the moves: {', '.join(MOVEMENT_STRATEGIES)}, or several separated by commas "
        "(the first decides, the next break ties)",
        choices=MOVEMENT_STRATEGIES, planner=True, cli=CliFlag("--strategy"),
        dag=DagField("Move order", HOW,
                     description="Which moves start first when the window has room (Cruise Control's replica "
                                 "movement strategies): largest-first (the run's tail stays short); "
                                 "busiest-brokers keeps the brokers with the most bytes left busy; "
                                 "smallest-first; postpone-urp starts under-replicated partitions last. Several, "
                                 "comma-separated: the first decides, the next break ties."),
        readme="Which moves start first",
        readme_note=" (" + ", ".join(f"`{s}`" for s in MOVEMENT_STRATEGIES if s != "largest-first")
                    + ", or a comma list)"),
    RunParam(
        # Off by default: it makes leader elections an operator did not ask for (each partition's
        # plan order is elected back at the end). On a decommission where the leaving broker
        # leads a third of what it holds, the source-free bound is about a third below the
        # fixed-leader one (planning/bounds.py).
        "leader_sourcing", bool, False,
        "before a partition's copies start, make its in-sync replica with the least outbound work "
        "its leader (the plan's preferred leaders are elected back at the end)",
        cli=CliFlag("--leader-sourcing"),
        dag=DagField("Leader-aware sourcing", HOW,
                     description="A new replica copies from the partition's leader. On: before a partition's "
                                 "copies start, the in-sync replica with the least outbound work becomes its "
                                 "leader (replica order, then a preferred election), so a busy leader does not "
                                 "set the pace while other in-sync replicas idle. Never on a partition under "
                                 "min ISR; within 'Leader movements at once'; the plan's preferred leaders are "
                                 "elected back at the end."),
        readme="Copy from the least busy in-sync replica"),
    RunParam(
        "maintenance_windows", tuple, (), "start new moves only inside this window (repeat the flag for more)",
        cli=CliFlag("--window", metavar="WINDOW"), dag=DagField("Maintenance windows", HOW, description=(
            'New moves start only inside these windows, e.g. "Mon-Fri 01:00-05:00 Europe/Berlin" or '
            '"cron:0 1 * * 1-5 for 4h UTC"; moves in flight finish. Empty: always.'))),
    RunParam(
        "rehearse", bool, False,
        "rehearse the run on a simulated copy of the cluster first; its prediction is the estimate",
        cli=CliFlag("--rehearse", execute_only=True),
        dag=DagField("Rehearse first", HOW,
                     description="Before moving anything, run the plan on a simulated copy of the cluster (a "
                                 "snapshot read now: brokers, racks, sizes, produce rates, throttles) with the "
                                 "same limits. Its predicted moving time becomes the estimate, and its report "
                                 "(timeline, slowest partitions, ISR risks, peak moves per broker) is in the "
                                 "prepare task's log and XCom.")),
)

#: name -> row.
PARAMS_BY_NAME: dict[str, RunParam] = {p.name: p for p in RUN_PARAMS}
#: Every run parameter (``validate_params`` names) with its default.
RUN_DEFAULTS: dict[str, ParamValue] = {p.name: p.default for p in RUN_PARAMS}
#: Former name -> name (accepted for one release; giving both is an error).
OLD_NAMES: dict[str, str] = {p.old_name: p.name for p in RUN_PARAMS if p.old_name}
#: Keys a DAG run or caller carries that belong to other layers (connections, planning inputs):
#: not run parameters, so the run ignores them.
OTHER_LAYER_KEYS: frozenset[str] = frozenset({
    "kafka_conn_id", "spark_conn_id", "plan", "goal", "brokers", "replication_factor", "snapshot",
    "bootstrap_servers", "run_id"})
#: Run parameters the planner takes as options (time estimate, warnings).
PLANNER_LIMITS: tuple[str, ...] = tuple(p.name for p in RUN_PARAMS if p.planner)


def _default(name: str) -> Any:
    return PARAMS_BY_NAME[name].default


THROTTLE_BYTES_PER_SEC: int = _default("throttle_bytes_per_sec")
LOG_DIR_THROTTLE_BYTES_PER_SEC: int | None = _default("log_dir_throttle_bytes_per_sec")
MAX_PARTITION_MOVEMENTS: int = _default("max_partition_movements")
MAX_MOVEMENTS_PER_BROKER: int = _default("max_movements_per_broker")
MAX_LEADER_MOVEMENTS: int = _default("max_leader_movements")
ADAPTIVE_CONCURRENCY: bool = _default("adaptive_concurrency")
MIN_MOVEMENTS_PER_BROKER: int = _default("min_movements_per_broker")
LEADER_SOURCING: bool = _default("leader_sourcing")
MOVE_TIMEOUT_MINUTES: float = _default("move_timeout_minutes")
POLL_INTERVAL_SECONDS: float = _default("poll_interval_seconds")
STALL_WINDOW_SECONDS: float = _default("stall_window_seconds")
CANCEL_ON_FAILURE: bool = _default("cancel_on_failure")
DRY_RUN: bool = _default("dry_run")
DISK_THRESHOLD_PERCENT: float | None = _default("disk_threshold_percent")
CONSUMER_FANOUT: float = _default("consumer_fanout")
ALLOW_RF_CHANGE: bool = _default("allow_rf_change")
ALLOW_INTERNAL_TOPICS: bool = _default("allow_internal_topics")
ALLOW_STALLING_MOVES: bool = _default("allow_stalling_moves")
PRODUCE_SAMPLE_SECONDS: float = _default("produce_sample_seconds")
REHEARSE: bool = _default("rehearse")
MOVEMENT_STRATEGY: str = _default("movement_strategy")
ADAPTIVE_THROTTLE: bool = _default("adaptive_throttle")
THROTTLE_MIN_BYTES_PER_SEC: int = _default("throttle_min_bytes_per_sec")
THROTTLE_MAX_BYTES_PER_SEC: int = _default("throttle_max_bytes_per_sec")


def drop_defaults_beside_old_names(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as a surface that fills in every default (CLI, DAG params) hands them on: an
    old name given (not None) stands for its parameter unless that was given too (differs from
    its default); an old name not given is dropped. Giving both is left for ``validate_params``.

    :param values: run parameters by domain name, defaults filled in, old names possibly present
    """
    out = dict(values)
    for old, name in OLD_NAMES.items():
        if out.get(old) is None:
            out.pop(old, None)
        elif out.get(name) == PARAMS_BY_NAME[name].default:
            out.pop(name, None)
    return out


def format_value(param: RunParam, value: ParamValue, *, per_unit: float = 1.0, unit: str | None = None) -> str:
    """A value as help and docs show it: ``50.0 MB/s``, ``120 min``, ``on``.

    :param param: its row
    :param value: the value (in the domain's unit)
    :param per_unit: shown value = value / this (seconds shown as minutes: 60)
    :param unit: the unit shown, default the row's
    """
    from kafka_reassign.units import format_rate

    unit = param.unit if unit is None else unit
    if isinstance(value, bool):
        return "on" if value else "off"
    if unit == "bytes/s" and not isinstance(value, (str, tuple)):
        return format_rate(None if value is None else float(value))
    if isinstance(value, (int, float)):
        return f"{value / per_unit:g}" + (f" {unit}" if unit else "")
    return str(value)


def _cli_type(param: RunParam) -> Any:
    from kafka_reassign.units import rate_argument

    return rate_argument if param.unit == "bytes/s" else {int: int, float: float}.get(param.kind)


def add_run_arguments(parser: "argparse.ArgumentParser", names: tuple[str, ...] | None = None, *,
                      execute: bool = True, off_flags: bool = True, purpose: str = "") -> None:
    """The run parameters' flags, values landing in their domain names (``args.move_timeout_minutes``).

    :param parser: the (sub)command's parser
    :param names: the parameters to add (default: every one with a CLI flag)
    :param execute: include the flags only ``execute`` takes (dry run, cancel, rehearse)
    :param off_flags: include the switches that set a value to None (``--no-throttle``)
    :param purpose: appended to the throttle's help, e.g. " for the time estimate"
    """
    for param in RUN_PARAMS if names is None else tuple(PARAMS_BY_NAME[n] for n in names):
        flag = param.cli
        if flag is None or (flag.execute_only and not execute) or (flag.snapshot_only and names is None):
            continue
        if param.kind is bool:
            parser.add_argument(flag.flag, dest=param.name, default=param.default,
                                action="store_false" if param.default else "store_true", help=param.help)
            continue
        shown = "" if param.default in (None, ()) else f" (default {format_value(param, param.default)})"
        extra = purpose if param.name == "throttle_bytes_per_sec" else ""
        if param.unit == "bytes/s" and param.default is not None:
            extra += ": 50MB/s, 10MiB/s or bytes/s"
        many = {"action": "append", "default": []} if param.kind is tuple else {"default": param.default}
        parser.add_argument(flag.flag, dest=param.name, type=_cli_type(param), metavar=flag.metavar,
                            help=f"{param.help}{extra}{shown}", **many)
        if flag.off_flag and off_flags:
            parser.add_argument(flag.off_flag, dest=f"no_{param.name}", action="store_true", help=flag.off_help)
        if param.old_name:
            parser.add_argument("--" + param.old_name.replace("_", "-"), dest=param.old_name, default=None,
                                type=_cli_type(param), metavar=flag.metavar,
                                help=f"old name of {flag.flag} (accepted for one release)")


def add_movement_arguments(parser: "argparse.ArgumentParser", *, purpose: str = "") -> None:
    """The planner's limit flags (:data:`PLANNER_LIMITS`), with the run's defaults.

    :param parser: the planner's parser
    :param purpose: appended to the throttle's help, e.g. " for the time estimate"
    """
    add_run_arguments(parser, PLANNER_LIMITS, off_flags=False, purpose=purpose)


def run_values_from_args(args: "argparse.Namespace") -> dict[str, Any]:
    """The run parameters a parsed command line gives, by domain name (flags it lacks: defaults).

    :param args: parsed by a parser with :func:`add_run_arguments`
    """
    values: dict[str, Any] = {}
    for param in RUN_PARAMS:
        # a list, as a repeated flag gives it (a command without the flag: the empty default)
        value = getattr(args, param.name, list(param.default) if isinstance(param.default, tuple) else param.default)
        if isinstance(param.default, tuple) and not value:  # a repeated flag not given: its default list
            value = list(param.default)
        values[param.name] = None if getattr(args, f"no_{param.name}", False) else value
        if param.old_name:
            values[param.old_name] = getattr(args, param.old_name, None)
    return drop_defaults_beside_old_names(values)


def planner_flags(limits: Mapping[str, Any]) -> list[str]:
    """The planner's command-line options for run limits given by name (None values left out).

    :param limits: :data:`PLANNER_LIMITS` names -> value
    """
    args: list[str] = []
    for name, value in limits.items():
        param = PARAMS_BY_NAME.get(name)
        if value is None or param is None or not param.planner or param.cli is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:  # a list: the flag repeats
            args += [param.cli.flag, str(item)]
    return args


def readme_defaults_table() -> str:
    """README.md's defaults table (Setting | Default | CLI option / DAG param), from the rows."""
    lines = ["| Setting | Default | CLI option / DAG param |", "|---|---|---|"]
    for param in RUN_PARAMS:
        if param.readme is None or param.cli is None:
            continue
        per_unit = param.dag.per_domain_unit if param.dag else 1.0
        unit = {60.0: "min"}.get(per_unit, param.unit)
        value = format_value(param, param.default, per_unit=per_unit, unit=unit)
        if param.unit == "bytes/s":
            value = value.replace(".0 ", " ") + " per broker"
        lines.append(f"| {param.readme} | {value} | `{param.cli.flag}` / `{param.dag_name}`{param.readme_note} |")
    return "\n".join(lines) + "\n"
