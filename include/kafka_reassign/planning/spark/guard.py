"""Bounded time and memory: the planning jobs are cancelled at a deadline, and a search task
that would not fit is refused before it starts, each with an error naming the setting to raise."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from kafka_reassign.errors import PlannerError


class PlanningTimeout(PlannerError):
    """The planning Spark jobs ran past ``timeout_seconds``."""


class PlanTooLarge(PlannerError):
    """One search task would hold more replicas than ``max_task_replicas`` allows."""


@contextmanager
def deadline(spark: Any, seconds: float) -> Iterator[None]:
    """Cancel every Spark job of ``spark`` after ``seconds`` and raise :class:`PlanningTimeout`.

    A timer thread cancels the jobs (the driver thread is blocked inside a Spark action and
    cannot check a clock itself); the action then fails and the error says why.
    """
    fired = threading.Event()

    def cancel() -> None:
        fired.set()
        if spark is not None:
            spark.sparkContext.cancelAllJobs()

    timer = threading.Timer(seconds, cancel)
    timer.daemon = True
    start = time.monotonic()
    timer.start()
    try:
        yield
    except Exception as exc:
        if fired.is_set():
            raise PlanningTimeout(_timeout_text(seconds)) from exc
        raise
    finally:
        timer.cancel()
    if fired.is_set() or time.monotonic() - start > seconds:
        raise PlanningTimeout(_timeout_text(seconds))


def _timeout_text(seconds: float) -> str:
    return (f"planning did not finish within timeout_seconds={seconds:g}: the Spark jobs were "
            "cancelled; raise --options '{\"timeout_seconds\": ...}' or give the Spark connection "
            "more executors")


def check_task_sizes(sizes: dict[str, int], limit: int) -> None:
    """Refuse search tasks above ``limit`` candidate replicas (before they run).

    :raises PlanTooLarge: naming the group, its size and the settings to raise
    """
    over = {g: n for g, n in sizes.items() if n > limit}
    if over:
        worst = max(over, key=over.get)  # type: ignore[arg-type]
        raise PlanTooLarge(
            f"the search task of rack {worst!r} would hold {over[worst]:,} candidate replicas, above "
            f"max_task_replicas={limit:,} (one task holds one rack's replicas in a Python worker): "
            "raise --options '{\"max_task_replicas\": N}' together with spark.executor.memory / "
            "spark.executor.pyspark.memory on the Spark connection (about 600 bytes per replica)")
