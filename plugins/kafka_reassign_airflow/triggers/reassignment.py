"""The trigger that watches the steps in flight of a reassignment without holding a worker slot.

Each poll reads ListPartitionReassignments, the live brokers and DescribeLogDirs of the
brokers in flight (:func:`kafka_reassign.execution.poll.watch_poll`, the executor's own reading and
judging) and fires one event as soon as the executor has something to do:

* ``attention`` - a step finished (the window can be refilled), stalled, failed, timed out,
  or a broker it needs just went offline (the event carries the steps' watches: stall and
  offline clocks continue in the task); also, with no reason, every ``refresh_seconds`` so
  the task saves the progress (bytes left, rate, ETA) the UI shows even while a long move
  runs;
* ``error`` - Kafka could not be read for longer than the error budget.

kafka-python is blocking, so every Kafka call runs in a worker thread (``asyncio.to_thread``);
the triggerer's event loop is never blocked. The trigger's kwargs are plain JSON: the steps in
flight, the connection id (never the config: no secret is serialised) and numbers.
"""
from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from kafka_reassign.defaults import POLL_INTERVAL_SECONDS

#: consecutive failed polls tolerated before the trigger gives up (brief network blips, a
#: controller failover) - the admin client already retries each call.
MAX_CONSECUTIVE_ERRORS = 5


#: Polls between two read-only checks that the run's throttle is still in place.
THROTTLE_CHECK_EVERY = 3
#: Seconds between two progress saves while nothing else wakes the task (the trigger cannot
#: write to the metadata DB itself: the woken task saves and defers again).
PROGRESS_REFRESH_SECONDS = 60.0


class ReassignmentWatchTrigger(BaseTrigger):
    """Poll the steps in flight until one needs the executor.

    :param kafka_conn_id: Airflow connection id of the cluster
    :param spec: :meth:`kafka_reassign.execution.executor.MoveExecutor.watch_spec` plus ``throttle``
        (:func:`kafka_reassign.throttle.guard.expected_throttle`): plain JSON, every field named
    :param poll_interval: seconds between polls (the first poll comes one interval after the
        task deferred: it has just polled)
    :param run_id: the DAG run (for log lines)
    :param refresh_seconds: wake the task at least this often to save progress (0: only when a
        step needs it)
    """

    def __init__(self, kafka_conn_id: str, spec: dict[str, Any], poll_interval: float = POLL_INTERVAL_SECONDS,
                 run_id: str = "", refresh_seconds: float = PROGRESS_REFRESH_SECONDS) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.spec = spec
        self.poll_interval = float(poll_interval)
        self.run_id = run_id
        self.refresh_seconds = float(refresh_seconds)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"kafka_conn_id": self.kafka_conn_id, "spec": self.spec, "poll_interval": self.poll_interval,
                 "run_id": self.run_id, "refresh_seconds": self.refresh_seconds})

    def _connect(self) -> Any:
        from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook

        return KafkaAdminHook(kafka_config_id=self.kafka_conn_id).get_admin()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # The first import pulls in kafka-python and the domain package: do it off the loop.
        poll = await asyncio.to_thread(importlib.import_module, "kafka_reassign.execution.poll")
        spec, admin, errors, seen, polls = self.spec, None, 0, set(), 0
        refresh_at = time.monotonic() + self.refresh_seconds if self.refresh_seconds > 0 else float("inf")
        try:
            while spec.get("steps"):
                await asyncio.sleep(self.poll_interval)
                try:
                    if admin is None:
                        admin = await asyncio.to_thread(self._connect)
                    # One blocking poll in a thread: the event loop keeps serving other triggers.
                    spec, reasons = await asyncio.to_thread(poll.watch_poll, admin, spec, time.time(), seen)
                    polls += 1
                    if spec.get("throttle") and polls % THROTTLE_CHECK_EVERY == 0:
                        # Read-only: the worker this wakes re-applies (and records) what is missing.
                        guard = await asyncio.to_thread(importlib.import_module, "kafka_reassign.throttle.guard")
                        reasons = reasons + await asyncio.to_thread(guard.throttle_drift, admin, spec["throttle"])
                    errors = 0
                    left = sum(int(w["bytes_left"]) for w in spec["watch"].values())
                    self.log.info("run %s: %d step(s) in flight, %d bytes left", self.run_id, len(spec["steps"]), left)
                except Exception as exc:  # Kafka unreachable, timeouts: retry a few times
                    errors += 1
                    self.log.warning("run %s: poll %d failed: %s", self.run_id, errors, exc)
                    admin = await _drop(admin)
                    if errors >= MAX_CONSECUTIVE_ERRORS:
                        yield TriggerEvent({"status": "error", "message": f"could not read progress from Kafka "
                                                                          f"{errors} times in a row: {exc}"})
                        return
                    continue
                if reasons or time.monotonic() >= refresh_at:
                    yield TriggerEvent({"status": "attention", "watch": spec["watch"], "reasons": reasons})
                    return
            yield TriggerEvent({"status": "attention", "watch": spec.get("watch", {}), "reasons": []})
        finally:
            await _drop(admin)


async def _drop(admin: Any) -> None:
    if admin is None:
        return None
    try:
        await asyncio.to_thread(admin.close)
    except Exception:  # closing a broken client must not hide the real outcome
        pass
    return None
