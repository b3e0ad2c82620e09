"""The trigger that watches one batch of a reassignment without holding a worker slot.

Each poll reads ListPartitionReassignments, the ISR from metadata and replica sizes/lag
from DescribeLogDirs (through :func:`kafka_reassign.reassign.poll_batch`), logs a KIP-179
style table and a summary line, and ends with one event:

* ``success``  - every partition of the batch reached its step target and is fully in sync
* ``stalled``  - bytes left have not fallen for the stall window (the message says what to change)
* ``offline``  - a broker the batch needs is down (its replicas cannot catch up)
* ``timeout``  - the batch's deadline passed
* ``error``    - Kafka could not be read for longer than the error budget

kafka-python is blocking, so every Kafka call runs in a worker thread (``asyncio.to_thread``);
the triggerer's event loop is never blocked. The trigger's kwargs are plain JSON: the batch,
the connection id (never the config: no secret is serialised) and numbers.
"""
from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

#: consecutive failed polls tolerated before the trigger gives up (brief network blips, a
#: controller failover) - the admin client already retries each call.
MAX_CONSECUTIVE_ERRORS = 5


class ReassignmentBatchTrigger(BaseTrigger):
    """Poll one batch until it is done, stalls, loses a broker or times out.

    :param kafka_conn_id: Airflow connection id of the cluster
    :param batch: the batch as JSON (``kafka_reassign.steps.Batch.to_json()``)
    :param deadline: unix time after which the batch has timed out
    :param poll_interval: seconds between polls
    :param stall_window: seconds without progress that count as a stall
    :param run_id: the DAG run (for log lines)
    :param throttle_rate: the replication throttle in force (bytes/s), for the stall diagnosis
    :param min_seconds: fire no event sooner than this after starting (a task resumed before the
        scheduler handled its deferring try's executor event is failed by the scheduler)
    """

    def __init__(self, kafka_conn_id: str, batch: dict[str, Any], deadline: float,
                 poll_interval: float = 30.0, stall_window: float = 600.0, run_id: str = "",
                 throttle_rate: int | None = None, min_seconds: float = 0.0) -> None:
        super().__init__()
        self.min_seconds = float(min_seconds)
        self.kafka_conn_id = kafka_conn_id
        self.batch = batch
        self.deadline = float(deadline)
        self.poll_interval = float(poll_interval)
        self.stall_window = float(stall_window)
        self.run_id = run_id
        self.throttle_rate = int(throttle_rate) if throttle_rate else None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"kafka_conn_id": self.kafka_conn_id, "batch": self.batch, "deadline": self.deadline,
             "poll_interval": self.poll_interval, "stall_window": self.stall_window, "run_id": self.run_id,
             "throttle_rate": self.throttle_rate, "min_seconds": self.min_seconds},
        )

    def _connect(self) -> Any:
        from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook

        return KafkaAdminHook(kafka_config_id=self.kafka_conn_id).get_admin()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # The first import pulls in kafka-python and the domain package: do it off the loop.
        watch_module = await asyncio.to_thread(importlib.import_module, "kafka_reassign_airflow.sensors.watch")
        watch = watch_module.BatchWatch(self.batch, stall_window=self.stall_window, deadline=self.deadline,
                           throttle_rate=self.throttle_rate, log=self.log)
        admin = None
        errors = 0
        started = time.monotonic()
        try:
            while True:
                try:
                    if admin is None:
                        admin = await asyncio.to_thread(self._connect)
                    # One blocking poll in a thread: the event loop keeps serving other triggers.
                    outcome = await asyncio.to_thread(watch.poll, admin, time.time())
                    errors = 0
                except Exception as exc:  # Kafka unreachable, timeouts: retry a few times
                    errors += 1
                    self.log.warning("batch %s: poll %d failed: %s", watch.index, errors, exc)
                    if admin is not None:
                        await asyncio.to_thread(_close_quietly, admin)
                        admin = None
                    if errors >= MAX_CONSECUTIVE_ERRORS:
                        yield TriggerEvent({"status": "error", "batch": watch.index,
                                            "message": f"batch {watch.index}: could not read progress from "
                                                       f"Kafka {errors} times in a row: {exc}"})
                        return
                    outcome = watch.check_deadline(time.time())
                if outcome is not None:
                    early = self.min_seconds - (time.monotonic() - started)
                    if early > 0:
                        await asyncio.sleep(early)
                    yield TriggerEvent(outcome)
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            if admin is not None:
                await asyncio.to_thread(_close_quietly, admin)


def _close_quietly(admin: Any) -> None:
    try:
        admin.close()
    except Exception:  # closing a broken client must not hide the real outcome
        pass
