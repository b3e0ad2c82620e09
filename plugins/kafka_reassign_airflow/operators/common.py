"""Shared parts of the reassignment operators: the admin client, the prepared run, params.

Every operator connects through :class:`KafkaAdminHook`, calls one idempotent domain step and
passes plain JSON along XCom. Retrying any of them is safe: prepare writes nothing to Kafka,
the throttle is applied with its prior values recorded first (a retry keeps the first
record's priors), executing skips partitions already at their target and adopts
moves already heading there, cancelling and restoring are no-ops the second time.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

if TYPE_CHECKING:
    from airflow.sdk import Context

    from kafka_reassign.execution.book import PagedStep
    from kafka_reassign.run.paged import PagedRun
    from kafka_reassign.run.payload import PreparedPayload
    from kafka_reassign.run.prepare import PreparedRun

PREPARE_TASK_ID = "prepare"
PREPARED_XCOM_KEY = "prepared"
#: The execute task's head of the run (:class:`~kafka_reassign.run.paged.PagedRun`) and its pages of steps.
PAGED_XCOM_KEY = "paged"
PAGE_XCOM_KEY = "steps-page-{}"


def run_params(context: Context) -> dict[str, Any]:
    return dict(context.get("params") or {})


def admin_client(conn_id: str) -> Any:
    # Imported here: the Kafka provider's hook module pulls in confluent-kafka, which DAG
    # parsing does not need.
    from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook

    return KafkaAdminHook(kafka_config_id=conn_id).get_admin()


def pull_prepared(context: Context, prepare_task_id: str) -> PreparedPayload | None:
    """The payload prepare pushed (None: prepare did not finish); fails on another schema version."""
    from kafka_reassign.run.payload import PayloadVersionError, PreparedPayload

    data = context["ti"].xcom_pull(task_ids=prepare_task_id, key=PREPARED_XCOM_KEY)
    if data is None:
        return None
    try:
        return PreparedPayload.from_json(data)
    except PayloadVersionError as exc:
        # Written by another release (an upgrade mid-run): retrying cannot help.
        raise AirflowFailException(str(exc)) from exc


def push_pages(ti: Any, prepared: PreparedRun) -> None:
    """Store the run's steps once, a page per XCom, for the execute task to read a page at a time."""
    from kafka_reassign.run.paged import PagedRun, pages_json

    paged, pages = PagedRun.of(prepared)
    for k, page in enumerate(pages_json(pages)):
        ti.xcom_push(key=PAGE_XCOM_KEY.format(k), value=page)
    ti.xcom_push(key=PAGED_XCOM_KEY, value=paged.to_json())  # last: present only with every page


def pull_paged(context: Context, prepare_task_id: str) -> tuple[PagedRun, Callable[[int], list[PagedStep]]] | None:
    """The run's head and a reader of its pages (None: prepare stored none, e.g. an older release)."""
    from kafka_reassign.run.paged import PagedRun, page_from_json

    ti = context["ti"]
    data = ti.xcom_pull(task_ids=prepare_task_id, key=PAGED_XCOM_KEY)
    if data is None:
        return None

    def load(k: int) -> list[PagedStep]:
        page = ti.xcom_pull(task_ids=prepare_task_id, key=PAGE_XCOM_KEY.format(k))
        if page is None:
            raise AirflowFailException(f"page {k} of the prepared steps is missing from XCom: clear prepare")
        return page_from_json(page)

    return PagedRun.from_json(data), load


def is_run_active(dag_id: str, run_id: str) -> bool:
    """Whether a DAG run is still queued or running (through the Task SDK)."""
    if not dag_id or not run_id:
        return False
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    try:
        state = RuntimeTaskInstance.get_dagrun_state(dag_id=dag_id, run_id=run_id)
    except Exception:  # the run was deleted: it holds nothing any more
        return False
    return str(getattr(state, "value", state)) in ("queued", "running")


class RunStepOperator(BaseOperator):
    """Common parts of the steps after prepare: the connection and the prepared run."""

    template_fields: Sequence[str] = ("kafka_conn_id",)

    def __init__(self, *, kafka_conn_id: str = "kafka_default", prepare_task_id: str = PREPARE_TASK_ID,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self.prepare_task_id = prepare_task_id

    def prepared(self, context: Context) -> PreparedPayload:
        data = pull_prepared(context, self.prepare_task_id)
        if data is None:
            raise AirflowSkipException("prepare did not produce a run (it failed or was skipped)")
        return data

