"""The project's metrics, sent through Airflow's metrics layer (StatsD or OpenTelemetry).

Turned on with Airflow's own ``[metrics]`` settings (``statsd_on`` / ``otel_on``, host, port,
prefix); nothing to configure here. Names (under Airflow's ``[metrics] statsd_prefix``):

==========================================  =========  ==========================================
``kafka_reassign.plan.moves``               gauge      partition moves in the run's plan
``kafka_reassign.plan.bytes``               gauge      bytes the plan copies
``kafka_reassign.plan.moved_over_bound``    gauge      bytes moved / lower bound of the goal (x1000)
``kafka_reassign.moves.done``               gauge      moves finished
``kafka_reassign.moves.in_flight``          gauge      moves Kafka is carrying out now
``kafka_reassign.moves.queued``             gauge      moves not started yet
``kafka_reassign.bytes_moved``              gauge      bytes copied so far
``kafka_reassign.bytes_left``               gauge      bytes still to copy
``kafka_reassign.rate_bytes_per_sec``       gauge      measured copy rate
``kafka_reassign.leader_changes``           gauge      preferred leader elections the run made
``kafka_reassign.throttle.rate``            gauge      replication throttle set (bytes/s)
``kafka_reassign.throttle.brokers``         gauge      brokers the run throttled
``kafka_reassign.throttle.leftovers``       gauge      brokers still carrying a run's throttle
==========================================  =========  ==========================================

Every metric carries the tags ``dag_id`` and ``cluster`` (StatsD without tag support drops
them). A metric failure never fails a task: metrics are best effort.

The functions take plain values (or any object with a ProgressView's attributes), so the
CLI, the operators and the tests can call them alike.
"""
from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)
PREFIX = "kafka_reassign"


def _gauge(name: str, value: float | int | None, tags: dict[str, Any]) -> None:
    if value is None:
        return
    try:
        from airflow.sdk.observability.stats import gauge

        gauge(f"{PREFIX}.{name}", float(value), tags={k: str(v) for k, v in tags.items() if v is not None})
    except Exception as exc:  # best effort: a metrics backend problem must not fail a move
        log.debug("metric %s not sent: %s", name, exc)


def _tags(dag_id: str | None, cluster: str | None) -> dict[str, Any]:
    return {"dag_id": dag_id, "cluster": cluster}


def plan_size(*, moves: int, bytes_to_move: int, moved_over_bound: float | None = None,
              dag_id: str | None = None, cluster: str | None = None) -> None:
    """The size of the plan a run carries out.

    :param moves: partition moves
    :param bytes_to_move: bytes the moves copy
    :param moved_over_bound: data moved / the goal's lower bound (1.0 = optimal), when planned
    """
    tags = _tags(dag_id, cluster)
    _gauge("plan.moves", moves, tags)
    _gauge("plan.bytes", bytes_to_move, tags)
    # StatsD gauges are often integers downstream: keep three decimals as thousandths.
    _gauge("plan.moved_over_bound", None if moved_over_bound is None else round(moved_over_bound * 1000), tags)


def progress(*, done: int, in_flight: int, queued: int, bytes_moved: int, bytes_left: int | None = None,
             rate_bytes_per_sec: float | None = None, leader_changes: int | None = None,
             dag_id: str | None = None, cluster: str | None = None) -> None:
    """Where the moves stand (call on each progress poll)."""
    tags = _tags(dag_id, cluster)
    _gauge("moves.done", done, tags)
    _gauge("moves.in_flight", in_flight, tags)
    _gauge("moves.queued", queued, tags)
    _gauge("bytes_moved", bytes_moved, tags)
    _gauge("bytes_left", bytes_left, tags)
    _gauge("rate_bytes_per_sec", rate_bytes_per_sec, tags)
    _gauge("leader_changes", leader_changes, tags)


def progress_view(view: Any, *, dag_id: str | None = None, cluster: str | None = None) -> None:
    """:func:`progress` from a :class:`kafka_reassign.execution.progress.ProgressView` (or a dict of
    its JSON): steps done / in flight / queued, bytes moved and left, rate."""
    get = view.get if isinstance(view, dict) else (lambda k, d=None: getattr(view, k, d))
    progress(done=int(get("steps_done", 0) or 0), in_flight=int(get("steps_in_flight", 0) or 0),
             queued=int(get("steps_queued", 0) or 0), bytes_moved=int(get("bytes_moved", 0) or 0),
             bytes_left=get("bytes_left"), rate_bytes_per_sec=get("rate_bytes_per_sec"),
             leader_changes=get("leader_changes"), dag_id=dag_id, cluster=cluster)


def throttle_set(*, rate_bytes_per_sec: int, brokers: int, dag_id: str | None = None,
                 cluster: str | None = None) -> None:
    """The replication throttle a run set, and on how many brokers."""
    tags = _tags(dag_id, cluster)
    _gauge("throttle.rate", rate_bytes_per_sec, tags)
    _gauge("throttle.brokers", brokers, tags)


def throttle_leftovers(brokers: int, *, dag_id: str | None = None, cluster: str | None = None) -> None:
    """Brokers still carrying a run's throttle after it tried to restore (0 = clean)."""
    _gauge("throttle.leftovers", brokers, _tags(dag_id, cluster))
