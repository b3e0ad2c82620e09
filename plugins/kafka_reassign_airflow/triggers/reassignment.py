"""The trigger that watches the steps in flight of a reassignment without holding a worker slot.

Each full poll reads ListPartitionReassignments, the live brokers and DescribeLogDirs of the
brokers in flight (:func:`kafka_reassign.execution.poll.watch_poll`, the executor's own reading and
judging). Between full polls, it wakes when a step is due to finish and makes a cheap check
(one ListPartitionReassignments, at most one a second: :mod:`kafka_reassign.execution.wake`); a
step that left the listing is judged by a full poll at once. It fires one event as soon as the
executor has something to do:

* ``attention`` - a step finished (the window can be refilled), stalled, failed, timed out,
  or a broker it needs just went offline (the event carries the steps' watches: stall and
  offline clocks continue in the task); also, with no reason, every ``refresh_seconds`` so
  the task saves the progress (bytes left, rate, ETA) the UI shows even while a long move
  runs; and when a broker the window held steps back from is about to run low on work (the
  task refills the window before it runs dry);
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
#: The first save of a run's progress comes this soon (or one poll, if longer): a rate and an
#: ETA need two samples apart, and a person who has just started a run wants them in seconds.
FIRST_REFRESH_SECONDS = 10.0
#: Wakes of the next-wake schedule that go to the task at once, with the reason logged.
_WAKE_TASK = {"refill": "a broker is running low on moves in flight: room for more",
              "opens": "the maintenance window opens: new moves may start"}


def first_refresh_seconds(poll_interval: float) -> float:
    """How soon the task is woken to save progress while the run has no rate yet."""
    return min(PROGRESS_REFRESH_SECONDS, max(FIRST_REFRESH_SECONDS, poll_interval))


class ReassignmentWatchTrigger(BaseTrigger):
    """Poll the steps in flight until one needs the executor.

    :param kafka_conn_id: Airflow connection id of the cluster
    :param spec: :meth:`kafka_reassign.execution.executor.MoveExecutor.watch_spec` plus ``throttle``
        (:func:`kafka_reassign.throttle.guard.expected_throttle`): plain JSON, every field named
    :param poll_interval: seconds between full polls (the first comes one interval after the
        task deferred: it has just polled); cheap checks come as steps are due to finish
    :param run_id: the DAG run (for log lines)
    :param refresh_seconds: wake the task at least this often to save progress (0: only when a
        step needs it); None: :data:`PROGRESS_REFRESH_SECONDS` (also how often a paused run with
        nothing in flight re-reads its pause), read when the trigger is made
    """

    def __init__(self, kafka_conn_id: str, spec: dict[str, Any], poll_interval: float = POLL_INTERVAL_SECONDS,
                 run_id: str = "", refresh_seconds: float | None = None) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.spec = spec
        self.poll_interval = float(poll_interval)
        self.run_id = run_id
        self.refresh_seconds = float(PROGRESS_REFRESH_SECONDS if refresh_seconds is None else refresh_seconds)

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
        next_poll, last_check = time.time() + self.poll_interval, 0.0
        idle = self._idle_until(spec)
        if idle is not None:  # held back with nothing in flight: no worker until the window or a pause re-read
            await asyncio.sleep(max(0.0, idle - time.time()))
            yield TriggerEvent({"status": "attention", "watch": {}, "reasons": [spec.get("held") or "held back"]})
            return
        try:
            while spec.get("steps"):
                when, what = poll.next_watch_wake(spec, last_check, time.time(), next_poll)
                await asyncio.sleep(max(0.0, when - time.time()))
                if what in _WAKE_TASK:
                    yield TriggerEvent({"status": "attention", "watch": spec["watch"], "reasons": [_WAKE_TASK[what]]})
                    return
                try:
                    if admin is None:
                        admin = await asyncio.to_thread(self._connect)
                    if what == "check":
                        last_check = time.time()
                        # One ListPartitionReassignments; the full poll only when a step left it.
                        if not await asyncio.to_thread(poll.watch_check, admin, spec):
                            continue
                    # One blocking poll in a thread: the event loop keeps serving other triggers.
                    spec, reasons = await asyncio.to_thread(poll.watch_poll, admin, spec, time.time(), seen)
                    next_poll = time.time() + self.poll_interval
                    polls += 1
                    reasons = reasons + await self._throttle_drift(admin, spec, polls)
                    errors = 0
                    left = sum(int(w["bytes_left"]) for w in spec["watch"].values())
                    self.log.info("run %s: %d step(s) in flight, %d bytes left", self.run_id, len(spec["steps"]), left)
                except Exception as exc:  # Kafka unreachable, timeouts: retry a few times
                    errors += 1
                    self.log.warning("run %s: poll %d failed: %s", self.run_id, errors, exc)
                    admin = await _drop(admin)
                    next_poll = time.time() + self.poll_interval
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

    def _idle_until(self, spec: dict[str, Any]) -> float | None:
        """With no step in flight and new ones held back: when to wake the task (None: not idle)."""
        if spec.get("steps"):
            return None
        if spec.get("paused"):
            return time.time() + (self.refresh_seconds or self.poll_interval)
        opens = spec.get("reopens_at")
        return float(opens) if opens is not None else None

    async def _throttle_drift(self, admin: Any, spec: dict[str, Any], polls: int) -> list[str]:
        """Every few full polls, a read-only check that the run's throttle is still in place."""
        if not spec.get("throttle") or polls % THROTTLE_CHECK_EVERY:
            return []
        # Read-only: the worker this wakes re-applies (and records) what is missing.
        guard = await asyncio.to_thread(importlib.import_module, "kafka_reassign.throttle.guard")
        drift: list[str] = await asyncio.to_thread(guard.throttle_drift, admin, spec["throttle"])
        return drift


async def _drop(admin: Any) -> None:
    if admin is None:
        return None
    try:
        await asyncio.to_thread(admin.close)
    except Exception:  # closing a broken client must not hide the real outcome
        pass
    return None
