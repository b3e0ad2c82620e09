"""Typed DAG params of the reassignment DAGs, with the descriptions the trigger form shows.

The run parameters' params (names, defaults, bounds, descriptions) are derived from the table
:data:`kafka_reassign.defaults.RUN_PARAMS` (shared with the CLI). JSON-schema types
let Airflow refuse a wrong type (a string for a rate, a negative movement limit) before a run even
exists; :func:`run_options` then turns the resolved params into the keyword dict the domain
layer's ``prepare`` validates again (the REST API and ``dag.test`` can pass what the form
would not).
"""
from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from kafka_reassign import defaults as D

GOALS = ["rebalance", "add-brokers", "remove-brokers", "replication-factor", "rack-repair", "disk-threshold"]

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

#: Section names used by the trigger form to group the fields (the run parameters' table has them).
_WHAT = D.WHAT


def _planning_params() -> dict[str, Param]:
    """The params of other layers: the connections and what to move."""
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
                        "replication_factor), rack-repair (one replica per rack where possible), disk-threshold "
                        "(offload every log dir above disk_threshold_percent, moving the least data).",
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
    }


def _schema(param: D.RunParam, *, null: bool | None = None) -> dict[str, Any]:
    """The JSON schema of a run parameter's DAG param (bounds in the DAG's unit).

    :param param: its row
    :param null: whether null is accepted (default: where the domain takes it and the DAG does not refuse it)
    """
    name = {bool: "boolean", int: "integer", float: "number", str: "string", tuple: "array"}[param.kind]
    if null is None:
        null = param.nullable and not (param.dag is not None and param.dag.refuse_null)
    schema: dict[str, Any] = {"type": ["null", name] if null else name}
    if param.minimum is not None:
        schema["exclusiveMinimum" if param.exclusive_minimum else "minimum"] = param.minimum
    if param.maximum is not None:
        schema["maximum"] = param.maximum
    if param.kind is tuple:  # maintenance windows: strings, checked by the domain at prepare
        schema["items"] = {"type": "string", "minLength": 1}
    if param.choices:
        one = "|".join(param.choices)
        schema["pattern"] = f"^({one})(,({one}))*$"
    return schema


def _scaled(param: D.RunParam, value: Any, *, to_domain: bool) -> Any:
    """A value in the domain's unit from the DAG param's (seconds from minutes), or back.

    :param param: its row
    :param value: the value (left alone unless a number)
    :param to_domain: DAG -> domain; False: domain -> DAG
    """
    per = param.dag.per_domain_unit if param.dag is not None else 1.0
    if isinstance(value, tuple):
        return list(value)  # JSON schema's arrays are lists
    if per == 1 or isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return value * per if to_domain else value / per


def _run_params() -> dict[str, Param]:
    """The DAG params of the run parameters' table (with the old names still accepted)."""
    out: dict[str, Param] = {}
    for param in D.RUN_PARAMS:
        dag = param.dag
        if dag is None:
            continue
        description = dag.description
        if param.unit == "bytes/s" and param.default is not None:
            description += f" Default {D.format_value(param, param.default)}."
        out[param.dag_name] = Param(_scaled(param, param.default, to_domain=False), title=dag.title, description=description,
                                    section=dag.section, **_schema(param))
        if param.old_name:
            out[param.old_name] = Param(
                None, title=f"{dag.title}, old name", section=dag.section, **_schema(param, null=True),
                description=f"Old name of {param.dag_name}, accepted for this release: give "
                            f"{param.dag_name} instead (giving both is an error).")
    return out


def reassign_params() -> dict[str, Param]:
    """The params of ``kafka_reassign`` (a fresh dict of Param objects for each DAG)."""
    return {**_planning_params(), **_run_params()}


#: DAG param name -> its row of the run parameters' table.
_BY_DAG_NAME = {p.dag_name: p for p in D.RUN_PARAMS if p.dag is not None}
#: Goals whose plans change replication factors on purpose (so allow_rf_change is implied).
RF_CHANGING_GOALS = frozenset({"replication-factor"})


def run_options(params: dict[str, Any], goal: str | None = None) -> dict[str, Any]:
    """The run's params as the domain layer's ``validate_params`` names them.

    Unknown keys (a typo in a REST API conf) are passed on, so the domain validation rejects
    them by name instead of silently running with a default; so are old names, which it maps.
    The replication-factor goal implies ``allow_rf_change`` (decided here only).

    :param params: the run's resolved params (``context["params"]``), JSON values
    :param goal: the run's goal, when not among ``params``
    """
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in D.OTHER_LAYER_KEYS:
            continue
        row = _BY_DAG_NAME.get(key)
        if row is None:
            out[key] = value
        else:
            out[row.name] = _scaled(row, value, to_domain=True)
    if (goal or params.get("goal")) in RF_CHANGING_GOALS:
        out["allow_rf_change"] = True
    return D.drop_defaults_beside_old_names(out)


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
