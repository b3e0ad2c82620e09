"""Typed DAG params of the reassignment DAGs, with the descriptions the trigger form shows.

Defaults come from :mod:`kafka_reassign.defaults` (shared with the CLI). JSON-schema types
let Airflow refuse a wrong type (a string for a rate, a negative movement limit) before a run even
exists; :func:`run_options` then turns the resolved params into the keyword dict the domain
layer's ``prepare`` validates again (the REST API and ``dag.test`` can pass what the form
would not).
"""
from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from kafka_reassign import defaults as D
from kafka_reassign.units import format_rate

GOALS = ["rebalance", "add-brokers", "remove-brokers", "replication-factor", "rack-repair"]

#: JSON schema of a reassignment plan (Kafka's kafka-reassign-partitions.sh format), checked by
#: the trigger form and the REST API before a run exists; prepare checks it against the cluster.
PLAN_SCHEMA: dict[str, Any] = {
    "required": ["version", "partitions"],
    "properties": {
        "version": {"const": 1, "description": "always 1 (Kafka's reassignment format)"},
        "partitions": {"type": "array", "items": {
            "type": "object",
            "required": ["topic", "partition", "replicas"],
            "properties": {
                "topic": {"type": "string", "minLength": 1},
                "partition": {"type": "integer", "minimum": 0},
                # Duplicates are left to prepare, which names them with every other problem.
                "replicas": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                "log_dirs": {"type": "array", "items": {"type": "string", "pattern": "^(any|/.*)$"}},
            },
        }},
    },
}

#: Section names used by the trigger form to group the fields.
_WHAT = "What to move"
_HOW = "How fast and how much at once"
_SAFETY = "Safety"


def reassign_params() -> dict[str, Param]:
    """The params of ``kafka_reassign`` (a fresh dict of Param objects for each DAG)."""
    return {
        "kafka_conn_id": Param(
            "kafka_default", type="string", minLength=1, title="Kafka connection",
            description="Airflow connection id of the cluster (conn_type kafka; extra = librdkafka "
                        "config with bootstrap.servers and security settings).",
            section=_WHAT),
        "plan": Param(
            None, type=["object", "null"], **PLAN_SCHEMA, title="Reassignment plan",
            description='Kafka reassignment JSON, as kafka-reassign-partitions.sh, Cruise Control '
                        'or topicmappr write it: {"version": 1, "partitions": [{"topic": "t", '
                        '"partition": 0, "replicas": [4, 2, 3], "log_dirs": ["any", "any", "any"]}]}. '
                        "Leave empty (null) to compute a plan from the goal on Spark.",
            section=_WHAT),
        "goal": Param(
            None, type=["null", "string"], enum=[None, *GOALS], title="Goal (when no plan is given)",
            description="What the planner should achieve when plan is null: rebalance (even out "
                        "disk and leaders), add-brokers (fill the brokers listed), remove-brokers "
                        "(drain the brokers listed), replication-factor (change every topic's RF to "
                        "replication_factor), rack-repair (one replica per rack where possible).",
            section=_WHAT),
        "brokers": Param(
            None, type=["null", "array"], items={"type": "integer", "minimum": 0}, uniqueItems=True,
            title="Brokers",
            description="Broker ids for the goals add-brokers and remove-brokers, e.g. [7, 8].",
            section=_WHAT),
        "replication_factor": Param(
            None, type=["null", "integer"], minimum=1, title="Replication factor",
            description="Target replication factor for the goal replication-factor.",
            section=_WHAT),
        "spark_conn_id": Param(
            "spark_default", type="string", minLength=1, title="Spark connection",
            description="Spark connection the planning job is submitted to when plan is null (conn_type "
                        "spark; host = master: local[2], spark://spark-master with port 7077, yarn...). "
                        "When the connection does not exist the planner runs local[2] on the worker.",
            section=_WHAT),
        "allow_replication_factor_change": Param(
            False, type="boolean", title="Allow replication factor changes",
            description="A plan that changes a partition's number of replicas is refused unless this "
                        "is on (or the goal is replication-factor): a typo should not drop a replica.",
            section=_SAFETY),
        "allow_internal_topics": Param(
            False, type="boolean", title="Allow internal topics",
            description="Moving replicas of __consumer_offsets or __transaction_state is refused "
                        "unless this is on.",
            section=_SAFETY),
        "throttle_bytes_per_sec": Param(
            D.THROTTLE_BYTES_PER_SEC, type="integer", minimum=1024, title="Replication throttle (bytes/s)",
            description="KIP-73 replication throttle set on every broker that sends or receives a "
                        "replica (leader and follower rates). It must be above the produce rate of "
                        "the moving partitions or they never catch up. Default "
                        f"{format_rate(D.THROTTLE_BYTES_PER_SEC)}.",
            section=_HOW),
        "log_dir_throttle_bytes_per_sec": Param(
            D.LOG_DIR_THROTTLE_BYTES_PER_SEC, type=["null", "integer"], minimum=1024,
            title="Log-dir move throttle (bytes/s)",
            description="replica.alter.log.dirs.io.max.bytes.per.second for moves between disks of "
                        "one broker (KIP-113). Null = same as the replication throttle.",
            section=_HOW),
        "max_partition_movements": Param(
            D.MAX_PARTITION_MOVEMENTS, type="integer", minimum=1, title="Partition moves at once",
            description="At most this many partition moves (KIP-435 steps) in flight at once in the "
                        "whole cluster (Cruise Control's max.num.cluster.partition.movements).",
            section=_HOW),
        "max_movements_per_broker": Param(
            D.MAX_MOVEMENTS_PER_BROKER, type="integer", minimum=1, title="Moves per broker at once",
            description="At most this many moves at once that add a replica to, remove one from, or copy "
                        "from (as the leader) any one broker (Cruise Control's "
                        "num.concurrent.partition.movements.per.broker). The throttle caps each broker's "
                        "bandwidth whatever this is; fewer moves leave some of it unused.",
            section=_HOW),
        "max_leader_movements": Param(
            D.MAX_LEADER_MOVEMENTS, type="integer", minimum=1, title="Leader movements at once",
            description="Cap on partitions whose preferred leader changes at once (Cruise Control's "
                        "num.concurrent.leader.movements).",
            section=_HOW),
        "batch_timeout_minutes": Param(
            D.BATCH_TIMEOUT_MINUTES, type="number", exclusiveMinimum=0, title="Move timeout (minutes)",
            description="A move (KIP-435 step) not finished this long after its submission fails the "
                        "run (then cancel_on_failure and the throttle removal apply).",
            section=_SAFETY),
        "poll_interval_seconds": Param(
            D.POLL_INTERVAL_SECONDS, type="number", exclusiveMinimum=0, title="Progress poll interval (seconds)",
            description="How often the execute task's trigger reads the moves in flight (reassignments, "
                        "lag); a finished move's successor starts at most this long after it.",
            section=_HOW),
        "stall_window_minutes": Param(
            D.STALL_WINDOW_SECONDS / 60, type="number", exclusiveMinimum=0, title="Stall window (minutes)",
            description="Fail a move when its bytes left have not fallen for this long (KIP-73: a "
                        "throttle below the produce rate never catches up), or when a broker it needs has "
                        "been offline this long (shorter outages are waited out).",
            section=_SAFETY),
        "dry_run": Param(
            D.DRY_RUN, type="boolean", title="Dry run",
            description="Validate, print the plan, the steps and the exact config changes, and "
                        "stop without writing anything to the cluster.",
            section=_SAFETY),
        "cancel_on_failure": Param(
            D.CANCEL_ON_FAILURE, type="boolean", title="Cancel on failure",
            description="When a move fails, cancel (revert) this run's in-flight moves before the "
                        "throttle is removed. Off: moves keep going, unthrottled.",
            section=_SAFETY),
        "allow_stalling_moves": Param(
            D.ALLOW_STALLING_MOVES, type="boolean", title="Allow moves that would stall",
            description="The pre-flight refuses a run when a moving partition's produce rate plus the "
                        "in-sync replication Kafka counts in the throttle exceed it (the new replica "
                        "would never catch up and the partition stays under-replicated). On: start "
                        "such moves anyway.",
            section=_SAFETY),
        "produce_sample_seconds": Param(
            D.PRODUCE_SAMPLE_SECONDS, type="number", minimum=0, title="Produce-rate sampling (seconds)",
            description="Before the run, the moving partitions' produce rates are measured over this "
                        "window (log-end offsets and leader log growth) for the stall check and the "
                        "estimate. 0 = do not measure (the stall check is skipped).",
            section=_HOW),
        "movement_strategy": Param(
            D.MOVEMENT_STRATEGY, type="string", title="Move order",
            pattern=f"^({'|'.join(D.MOVEMENT_STRATEGIES)})(,({'|'.join(D.MOVEMENT_STRATEGIES)}))*$",
            description="Which moves start first when the window has room (Cruise Control's replica "
                        "movement strategies): largest-first (the run's tail stays short); "
                        "busiest-brokers keeps the brokers with the most bytes left busy; smallest-first; "
                        "postpone-urp starts under-replicated partitions last. Several, comma-separated: "
                        "the first decides, the next break ties.",
            section=_HOW),
        "rehearse": Param(
            D.REHEARSE, type="boolean", title="Rehearse first",
            description="Before moving anything, run the plan on a simulated copy of the cluster (a "
                        "snapshot read now: brokers, racks, sizes, produce rates, throttles) with the "
                        "same limits. Its predicted moving time becomes the estimate, and its report "
                        "(timeline, slowest partitions, ISR risks, peak moves per broker) is in the "
                        "prepare task's log and XCom.",
            section=_HOW),
    }


#: DAG param name -> domain (``kafka_reassign.planning.validate.validate_params``) name, where they differ.
_RENAMED = {"allow_replication_factor_change": "allow_rf_change"}
#: Params the domain layer does not take (the connections and planning inputs).
_NOT_DOMAIN = frozenset({"kafka_conn_id", "spark_conn_id", "plan", "goal", "brokers", "replication_factor"})


def run_options(params: dict[str, Any]) -> dict[str, Any]:
    """The run's params as the domain layer's ``validate_params`` names them.

    Unknown keys (a typo in a REST API conf) are passed on, so the domain validation rejects
    them by name instead of silently running with a default.

    :param params: the run's resolved params (``context["params"]``), JSON values
    """
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in _NOT_DOMAIN:
            continue
        if key == "stall_window_minutes":
            num = isinstance(value, (int, float)) and not isinstance(value, bool)
            out["stall_window_seconds"] = value * 60 if num else value
            continue
        out[_RENAMED.get(key, key)] = value
    if params.get("goal") == "replication-factor":
        out["allow_rf_change"] = True
    return out


def dag_schedule(setting: str, default: str) -> str | None:
    """A DAG's schedule from ``[kafka_reassign] <setting>`` (cheap at parse time: config only).

    ``none`` (any case) or an empty value turns the schedule off: the DAG then runs only when
    triggered (from the UI, the REST API or a test).

    :param setting: the option name, e.g. ``rebalance_schedule``
    :param default: cron expression or preset used when the option is not set
    """
    from airflow.configuration import conf

    value = conf.get("kafka_reassign", setting, fallback=default).strip()
    return None if value.lower() in ("", "none") else value
