"""One poll of a batch and what it means, shared by the trigger and the non-deferrable sensor.

Kept free of Airflow's operator machinery so that the deferrable path (trigger in the
triggerer) and the poke path (sensor in a worker) decide exactly the same way.
"""
from __future__ import annotations

import logging
from typing import Any

from kafka_reassign.progress import OFFLINE, BatchProgress, StallDetector
from kafka_reassign.steps import Batch

_log = logging.getLogger(__name__)


class BatchWatch:
    """State across polls of one batch: previous progress (for the rate) and the stall window.

    :param batch: the batch (JSON or :class:`Batch`)
    :param stall_window: seconds without progress that count as a stall
    :param deadline: unix time after which the batch has timed out
    :param throttle_rate: throttle in force, for the stall diagnosis
    :param log: where the table and summary go (the trigger's or the task's logger)
    """

    def __init__(self, batch: dict[str, Any] | Batch, stall_window: float, deadline: float,
                 throttle_rate: int | None = None, log: Any = None) -> None:
        self.batch = batch if isinstance(batch, Batch) else Batch.from_json(batch)
        self.index = self.batch.index
        self.deadline = float(deadline)
        self.throttle_rate = throttle_rate
        self.stall = StallDetector(stall_window)
        self.previous: BatchProgress | None = None
        self.polls = 0
        self.log = log or _log
        self.offline_polls = 0

    def poll(self, admin: Any, now: float) -> dict[str, Any] | None:
        """Read progress once (blocking), log it, and return a final event dict or None.

        :param admin: a connected KafkaAdmin
        :param now: unix time of the poll (wall clock, as the deadline)
        """
        from kafka_reassign.reassign import poll_batch

        progress = poll_batch(admin, self.batch, previous=self.previous, now=now)
        self.previous = progress
        from kafka_reassign_airflow import metrics

        metrics.progress(done=len(progress.done_partitions), in_flight=len(progress.pending_partitions), queued=0,
                         bytes_moved=max(0, progress.bytes_total - progress.bytes_left),
                         bytes_left=progress.bytes_left, rate_bytes_per_sec=progress.rate_bytes_per_sec)
        self.polls += 1
        self.log.info("batch %s progress (poll %d):\n%s", self.index, self.polls, progress.format_table())
        base = {"batch": self.index, "polls": self.polls, "summary": progress.summary(),
                "bytes_total": progress.bytes_total, "bytes_left": progress.bytes_left,
                "done_partitions": progress.done_partitions,
                "pending_partitions": progress.pending_partitions,
                "under_min_isr": progress.under_min_isr}
        if progress.done:
            return {**base, "status": "success",
                    "message": f"batch {self.index} done: {len(progress.done_partitions)} partition(s) "
                               f"at their target and in sync"}
        offline = sorted({r.broker for r in progress.rows if r.status == OFFLINE and r.role != "removing"})
        if offline:
            self.offline_polls += 1
            # One poll may race a broker restart (the metadata lags the listener); two in a
            # row is a broker that is really down.
            if self.offline_polls >= 2:
                names = sorted({f"{r.topic}-{r.partition}" for r in progress.rows
                                if r.status == OFFLINE and r.role != "removing"})
                return {**base, "status": "offline", "offline_brokers": offline,
                        "message": f"batch {self.index}: broker {', '.join(map(str, offline))} is offline, so "
                                   f"{', '.join(names)} cannot finish moving. Start the broker again and "
                                   "re-run (finished partitions are not moved again), or let "
                                   "cancel_on_failure revert the batch and plan without that broker."}
        else:
            self.offline_polls = 0
        self.stall.observe(now, progress.bytes_left)
        # Produce rates are not in the admin API, so the diagnosis works from the rows alone.
        stalled = self.stall.check(progress, None, self.throttle_rate)
        if stalled:
            return {**base, "status": "stalled", "message": f"batch {self.index} stalled: {stalled}"}
        return self.check_deadline(now, base)

    def check_deadline(self, now: float, base: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """A timeout event when ``now`` is past the deadline, else None."""
        if now < self.deadline:
            return None
        base = base or {"batch": self.index, "polls": self.polls,
                        "summary": self.previous.summary() if self.previous else "no progress read"}
        return {**base, "status": "timeout",
                "message": f"batch {self.index} timed out after batch_timeout_minutes "
                           f"({base.get('summary')}). Raise batch_timeout_minutes or "
                           "throttle_bytes_per_sec, or lower max_partition_movements."}
