"""Trigger-time check of a reassignment DAG's whole conf, before Airflow creates the run.

Airflow validates each param against its own JSON schema (types, ranges, the plan's inner
schema). Rules that span params cannot live in one param's schema: a plan or a goal must be
given, the broker goals need brokers, unknown keys (a typo in a REST API call) must not be
silently ignored. :class:`TriggerConfMiddleware`, installed on the api-server by the plugin,
applies :func:`conf_problems` to ``POST /api/v2/dags/<dag_id>/dagRuns`` (the REST API and the
UI's trigger form both use it) and answers 400 naming the problem in the DAG's own param names.

It applies to every DAG whose params include ``kafka_conn_id`` and ``throttle_bytes_per_sec``
(the example DAGs and the copies users make of them); other DAGs pass straight through.
"""
from __future__ import annotations

import asyncio
import difflib
import json
import logging
import re
from typing import Any, Mapping
from urllib.parse import unquote

from kafka_reassign import defaults as D
from kafka_reassign.planning.goal_order import goal_names, order_problems

log = logging.getLogger(__name__)

_TRIGGER_PATH = re.compile(r"^/api/v2/dags/([^/]+)/dagRuns/?$")
#: Names users reach for that are not params, and the param they mean: the run parameters' domain
#: names where the DAG names them otherwise (from their table), and a few guesses.
_ALIASES = {**{p.name: p.dag_name for p in D.RUN_PARAMS if p.dag is not None and p.dag_name != p.name},
            "throttle": "throttle_bytes_per_sec", "rate": "throttle_bytes_per_sec", "broker_ids": "brokers",
            "rf": "replication_factor", "conn_id": "kafka_conn_id", "dryrun": "dry_run"}
_BROKER_GOALS = {"add-brokers": "fill", "remove-brokers": "drain"}


def is_reassignment_dag(param_names: Any) -> bool:
    """Whether a DAG's params are this project's (so its conf is checked here)."""
    names = set(param_names)
    return {"kafka_conn_id", "throttle_bytes_per_sec"} <= names


def conf_problems(dag_id: str, defaults: Mapping[str, Any], conf: Mapping[str, Any] | None) -> list[str]:
    """What is wrong with a trigger conf, in the DAG's param names; empty when it may run.

    :param dag_id: the DAG, for messages
    :param defaults: the DAG's params: name -> default value
    :param conf: the conf of the trigger request
    """
    conf = dict(conf or {})
    problems = []
    for key in sorted(k for k in conf if k not in defaults):
        guess = _ALIASES.get(key) if _ALIASES.get(key) in defaults else None
        guess = guess or next(iter(difflib.get_close_matches(key, list(defaults), n=1, cutoff=0.6)), None)
        hint = f" - did you mean '{guess}'?" if guess else ""
        problems.append(f"unknown parameter '{key}'{hint} ({dag_id} takes: {', '.join(sorted(defaults))})")
    for old, name in sorted(D.OLD_NAMES.items()):
        if old in conf and name in conf:
            problems.append(f"'{old}' is the old name of '{name}': give one of them, not both")
    merged = {**defaults, **conf}
    if "plan" in defaults and "goal" in defaults and merged.get("plan") is None and merged.get("goal") is None:
        problems.append("give either 'plan' (a reassignment JSON) or 'goal' (what the planner should achieve): "
                        "both are empty, so there is nothing to do")
    goal = merged.get("goal") if merged.get("plan") is None else None
    if goal in _BROKER_GOALS and "brokers" in defaults and not merged.get("brokers"):
        problems.append(f"goal '{goal}' needs 'brokers': the ids of the brokers to {_BROKER_GOALS[goal]}, e.g. [7, 8]")
    if goal == "replication-factor" and "replication_factor" in defaults and merged.get("replication_factor") is None:
        problems.append("goal 'replication-factor' needs 'replication_factor', e.g. 3")
    if goal == "disk-threshold" and "disk_threshold_percent" in defaults and merged.get("disk_threshold_percent") is None:
        problems.append("goal 'disk-threshold' needs 'disk_threshold_percent', e.g. 80")
    if conf.get("balance_goals") is not None:  # refused at the trigger, before a task (or Spark) starts
        problems += [str(p) for p in order_problems(goal_names(conf["balance_goals"]))]
    return problems


def _dag_defaults(dag_id: str) -> dict[str, Any] | None:
    """The DAG's params (name -> default) from its serialized form, None when unknown."""
    from airflow.models.serialized_dag import SerializedDagModel

    dag = SerializedDagModel.get_dag(dag_id)
    if dag is None:
        return None
    return {k: dag.params.get_param(k).value for k in dag.params}


def check_trigger(dag_id: str, body: bytes) -> list[str]:
    """Problems of a trigger request body for ``dag_id`` (empty: let Airflow handle it)."""
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        return []  # Airflow answers malformed JSON itself
    conf = payload.get("conf") if isinstance(payload, dict) else None
    if conf is not None and not isinstance(conf, dict):
        return []
    defaults = _dag_defaults(dag_id)
    if defaults is None or not is_reassignment_dag(defaults):
        return []
    return conf_problems(dag_id, {k: (None if v.__class__.__name__ == "ArgNotSet" else v)
                                  for k, v in defaults.items()}, conf)


async def may_access_runs(request: Any, dag_id: str | None, method: str) -> bool:
    """Whether the request's user (bearer token, or the UI's session cookie) may ``method`` the
    DAG's runs (GET: read, POST: trigger). An invalid or missing token raises (401)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.api_fastapi.core_api.security import resolve_user_from_token

    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else request.cookies.get("_token")
    user = await resolve_user_from_token(token)
    return get_auth_manager().is_authorized_dag(method=method, access_entity=DagAccessEntity.RUN,
                                                details=DagDetails(id=dag_id), user=user)


async def _allowed(scope: dict[str, Any], dag_id: str) -> bool:
    """Only users who may trigger the DAG get our answer; others get Airflow's 401/403."""
    from starlette.requests import Request

    try:
        return await may_access_runs(Request(scope), dag_id, "POST")
    except Exception:
        return False


class TriggerConfMiddleware:
    """ASGI middleware: refuse a bad conf of a reassignment DAG with 400 before the run exists."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = _TRIGGER_PATH.match(scope.get("path", "")) if scope.get("type") == "http" else None
        if match is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        messages, body, more = [], b"", True
        while more:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            more = message.get("more_body", False) and message.get("type") == "http.request"
        dag_id = unquote(match.group(1))
        try:
            problems = await asyncio.to_thread(check_trigger, dag_id, body)
            if problems and not await _allowed(scope, dag_id):
                problems = []
        except Exception:  # never block a trigger because our check broke; Airflow still validates
            log.exception("conf check of %s failed", dag_id)
            problems = []
        if problems:
            await _reply_400(send, f"Invalid conf for {dag_id}: " + "; ".join(problems))
            return

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


async def _reply_400(send: Any, detail: str) -> None:
    data = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
