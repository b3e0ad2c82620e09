"""The sensor that waits for one batch: deferrable by default, poke mode when asked."""
from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException

from kafka_reassign_airflow.params import min_return_seconds

if TYPE_CHECKING:
    from airflow.sdk import Context

#: extra seconds the Airflow-side trigger timeout allows over the trigger's own deadline, so
#: the trigger reports the timeout itself (with the progress summary) before Airflow kills it.
_TIMEOUT_GRACE = 120.0


class ReassignmentBatchSensor(BaseSensorOperator):
    """Wait until every partition of a batch reached its step target and is in sync.

    Logs a KIP-179 style progress table and a summary line (bytes moved and left, rate, ETA)
    each poll; fails with a message that says what to change when the batch stalls, a broker
    it needs is offline, or ``batch_timeout_minutes`` passes.

    :param batch: the batch as JSON (templated, e.g. from a mapped task group)
    :param kafka_conn_id: Airflow connection id (conn_type kafka)
    :param batch_timeout_minutes: fail the batch after this long
    :param poll_interval_seconds: seconds between polls
    :param stall_window_minutes: fail when bytes left have not fallen for this long
    :param throttle_bytes_per_sec: throttle in force (for the stall diagnosis)
    :param deferrable: wait in the triggerer (default) instead of holding a worker slot
    """

    template_fields: Sequence[str] = ("batch", "kafka_conn_id", "batch_timeout_minutes",
                                      "poll_interval_seconds", "stall_window_minutes", "throttle_bytes_per_sec")
    ui_color = "#d9f0e8"

    def __init__(self, *, batch: Any, kafka_conn_id: str = "kafka_default",
                 batch_timeout_minutes: Any = 120, poll_interval_seconds: Any = 30,
                 stall_window_minutes: Any = 10, throttle_bytes_per_sec: Any = None,
                 deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch = batch
        self.kafka_conn_id = kafka_conn_id
        self.batch_timeout_minutes = batch_timeout_minutes
        self.poll_interval_seconds = poll_interval_seconds
        self.stall_window_minutes = stall_window_minutes
        self.throttle_bytes_per_sec = throttle_bytes_per_sec
        self.deferrable = deferrable
        self._watch = None
        self._outcome: dict[str, Any] | None = None

    # Templated values arrive as strings when a param is rendered with Jinja.
    def _num(self, v: Any) -> float:
        return float(v)

    def _deadline(self, context: Context) -> float:
        """Batch deadline measured from the sensor's first start (kept across deferrals)."""
        ti = context["ti"]
        start = getattr(ti, "start_date", None)
        started = start.timestamp() if start is not None else time.time()
        return started + self._num(self.batch_timeout_minutes) * 60.0

    def execute(self, context: Context) -> Any:
        self.poke_interval = self._num(self.poll_interval_seconds)
        self.timeout = self._num(self.batch_timeout_minutes) * 60.0 + _TIMEOUT_GRACE
        if not self.deferrable:
            return super().execute(context)
        from kafka_reassign_airflow.triggers.reassignment import ReassignmentBatchTrigger

        deadline = time.time() + self._num(self.batch_timeout_minutes) * 60.0
        self.log.info("Waiting for batch %s in the triggerer (poll every %ss, timeout %s min)",
                      self.batch.get("index"), self.poll_interval_seconds, self.batch_timeout_minutes)
        self.defer(
            trigger=ReassignmentBatchTrigger(
                kafka_conn_id=self.kafka_conn_id, batch=self.batch, deadline=deadline,
                poll_interval=self._num(self.poll_interval_seconds),
                stall_window=self._num(self.stall_window_minutes) * 60.0,
                run_id=context["run_id"],
                throttle_rate=int(self.throttle_bytes_per_sec) if self.throttle_bytes_per_sec else None,
                min_seconds=min_return_seconds()),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Turn the trigger's event into success (return the summary) or a clear failure."""
        return self._finish(event)

    def _complete(self) -> None:
        """The batch is done: move leadership to the new preferred leaders now (KIP-435)."""
        from kafka_reassign.reassign import complete_batch
        from kafka_reassign.steps import Batch

        from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook

        admin = KafkaAdminHook(kafka_config_id=self.kafka_conn_id).get_admin()
        try:
            elected = complete_batch(admin, Batch.from_json(self.batch))
        finally:
            admin.close()
        if elected:
            self.log.info("Preferred leader election for %d partition(s): %s", len(elected),
                          {f"{t}-{p}": err or "ok" for (t, p), err in elected.items()})

    def _finish(self, event: dict[str, Any] | None) -> dict[str, Any]:
        if not event:
            raise AirflowFailException(f"batch {self.batch.get('index')}: the trigger ended without an event")
        if event.get("status") != "success":
            # Not retried: a stall, an offline broker or a timeout needs a decision, and
            # cancel_on_failure / the throttle teardown must run now.
            raise AirflowFailException(event.get("message") or f"batch failed: {event}")
        self.log.info("%s", event.get("message"))
        self.log.info("%s", event.get("summary"))
        self._complete()
        return event

    def poke(self, context: Context) -> bool:
        from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook
        from kafka_reassign_airflow.sensors.watch import BatchWatch

        if self._watch is None:
            self._watch = BatchWatch(self.batch, stall_window=self._num(self.stall_window_minutes) * 60.0,
                                     deadline=self._deadline(context),
                                     throttle_rate=int(self.throttle_bytes_per_sec) if self.throttle_bytes_per_sec else None,
                                     log=self.log)
        admin = KafkaAdminHook(kafka_config_id=self.kafka_conn_id).get_admin()
        try:
            outcome = self._watch.poll(admin, time.time())
        finally:
            admin.close()
        if outcome is None:
            return False
        self._outcome = self._finish(outcome)
        return True
