"""Notifiers of reassignment runs: who hears about a failed (or finished) run, and what.

:class:`KafkaReassignNotifier` is an Airflow ``BaseNotifier``: give it as a DAG's (or a task's)
``on_failure_callback`` / ``on_success_callback``. The message says what failed and, above all,
whether the run left a replication throttle on the cluster and how to clean it (the run's
throttle record: brokers, keys, prior values, the exact undo commands).

Channels (``channels``): ``smtp:a@x.org,b@x.org`` (the SMTP provider, ``smtp_conn_id``),
``slack:#channel`` (Slack API, ``slack_conn_id``), ``slack-webhook`` (``slack_webhook_conn_id``),
``log`` (the callback's log only), or any callable ``f(subject, body)``. Slack needs
apache-airflow-providers-slack; a channel whose provider is missing is refused when the DAG is
parsed, not when the run fails.

The example DAGs take their channels from ``[kafka_reassign] notify_on_failure`` and
``notify_on_success`` (``<dag_id>_notify_on_failure`` overrides it for one DAG): see
:func:`run_notifiers`.
"""
from __future__ import annotations

import html
import logging
from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk import BaseNotifier

log = logging.getLogger(__name__)

Channel = str | Callable[[str, str], Any]
_KINDS = ("smtp", "slack", "slack-webhook", "log")


def _check_channel(channel: Channel) -> None:
    if callable(channel):
        return
    kind, _, target = str(channel).partition(":")
    if kind not in _KINDS:
        raise ValueError(f"notifier channel {channel!r}: expected one of {', '.join(k + ':' for k in _KINDS)} "
                         "or a callable")
    if kind == "smtp" and not target.strip():
        raise ValueError(f"notifier channel {channel!r}: give the address(es), e.g. smtp:kafka-ops@example.com")
    module = {"smtp": "airflow.providers.smtp.notifications.smtp", "slack": "airflow.providers.slack.notifications.slack",
              "slack-webhook": "airflow.providers.slack.notifications.slack_webhook"}.get(kind)
    if module:
        import importlib

        try:
            importlib.import_module(module)
        except ImportError:
            package = "apache-airflow-providers-smtp" if kind == "smtp" else "apache-airflow-providers-slack"
            raise ValueError(f"notifier channel {channel!r} needs {package} installed") from None


class KafkaReassignNotifier(BaseNotifier):
    """Tell people about a reassignment run, including any throttle it left behind.

    :param channels: where to send (see the module doc), e.g. ``["smtp:kafka-ops@example.com"]``
    :param smtp_conn_id: SMTP connection of ``smtp:`` channels
    :param slack_conn_id: Slack API connection of ``slack:`` channels
    :param slack_webhook_conn_id: Slack incoming-webhook connection of ``slack-webhook`` channels
    """

    template_fields = ("channels",)

    def __init__(self, *, channels: Sequence[Channel] = ("log",), smtp_conn_id: str | None = None,
                 slack_conn_id: str = "slack_api_default", slack_webhook_conn_id: str = "slack_default") -> None:
        super().__init__()
        for channel in channels:
            _check_channel(channel)
        self.channels = list(channels)
        self.smtp_conn_id = smtp_conn_id
        self.slack_conn_id = slack_conn_id
        self.slack_webhook_conn_id = slack_webhook_conn_id

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        dag = context.get("dag")
        if jinja_env is None and dag is not None and not hasattr(dag, "get_template_env"):
            # dag.test hands DAG callbacks a SerializedDAG, which has no template environment.
            from jinja2.sandbox import SandboxedEnvironment

            jinja_env = SandboxedEnvironment()
        super().render_template_fields(context, jinja_env)

    def notify(self, context: Any) -> None:
        subject, body = message_for(context)
        errors = []
        for channel in self.channels:
            try:
                self._send(channel, subject, body, context)
            except Exception as exc:  # one broken channel must not silence the others
                log.exception("notifier channel %r failed", channel)
                errors.append(f"{channel}: {exc}")
        if errors and len(errors) == len(self.channels):
            raise RuntimeError("every notifier channel failed: " + "; ".join(errors))

    async def async_notify(self, context: Any) -> None:
        """The same, from the triggerer (deadline alerts): the channels' clients are blocking."""
        import asyncio

        await asyncio.to_thread(self.notify, context)

    def _send(self, channel: Channel, subject: str, body: str, context: Any) -> None:
        if callable(channel):
            channel(subject, body)
            return
        kind, _, target = channel.partition(":")
        if kind == "log":
            log.warning("%s\n%s", subject, body)
        elif kind == "smtp":
            from airflow.providers.smtp.notifications.smtp import SmtpNotifier

            to = [a.strip() for a in target.split(",") if a.strip()]
            # Without "dag": the SMTP notifier builds its template environment from the DAG, which
            # a DAG callback may only have in serialized form.
            SmtpNotifier(to=to, subject=subject, html_content=f"<pre>{html.escape(body)}</pre>",
                         smtp_conn_id=self.smtp_conn_id).notify({k: v for k, v in context.items() if k != "dag"})
        elif kind == "slack":
            from airflow.providers.slack.notifications.slack import SlackNotifier

            SlackNotifier(slack_conn_id=self.slack_conn_id, channel=target or "#general",
                          text=f"*{subject}*\n```{body}```").notify(context)
        else:
            from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

            SlackWebhookNotifier(slack_webhook_conn_id=self.slack_webhook_conn_id,
                                 text=f"*{subject}*\n```{body}```").notify(context)


def _failed_tasks(context: Any) -> list[str]:
    ti = context.get("ti") or context.get("task_instance")
    if ti is not None and str(getattr(ti, "state", "")).endswith("failed"):
        return [ti.task_id]
    dag_run = context.get("dag_run")
    bad = ("failed", "upstream_failed")
    try:  # the metadata DB's DagRun (scheduler side, dag.test)
        from sqlalchemy import select

        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session

        with create_session() as session:
            rows = session.execute(select(TaskInstance.task_id, TaskInstance.state).where(
                TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id)).all()
        return sorted({task_id for task_id, state in rows if str(getattr(state, "value", state)) in bad})
    except Exception:
        pass
    try:  # through the Task SDK (DAG processor callbacks without DB access)
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        states = RuntimeTaskInstance.get_task_states(dag_id=dag_run.dag_id, run_ids=[dag_run.run_id])
        return sorted(t for t, st in (states.get(dag_run.run_id) or {}).items() if str(st) in bad)
    except Exception:  # the reason line still says why the run failed
        return []


def _throttle_record(run_id: str) -> Any:
    from kafka_reassign_airflow.record_store import VariableRecordStore

    return VariableRecordStore().get(run_id)


def _bootstrap(conn_id: str) -> str:
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    return str((conn.extra_dejson or {}).get("bootstrap.servers") or conn.host or "<bootstrap>")


def message_for(context: Any) -> tuple[str, str]:
    """(subject, body) for the run in ``context`` (a task or DAG callback context)."""
    from kafka_reassign.throttle.notices import run_summary_text

    dag_run = context.get("dag_run")
    dag_id = getattr(dag_run, "dag_id", None) or getattr(context.get("dag"), "dag_id", "?")
    run_id = getattr(dag_run, "run_id", None) or context.get("run_id") or "?"
    state = str(getattr(getattr(dag_run, "state", None), "value", getattr(dag_run, "state", "")) or "")
    if context.get("exception") is not None or context.get("reason") == "task_failure":
        state = "failed"
    params = context.get("params") or {}
    record = bootstrap = None
    try:
        record = _throttle_record(run_id)
    except Exception as exc:
        log.warning("cannot read the throttle record of run %s: %s", run_id, exc)
    try:
        bootstrap = _bootstrap(str(params.get("kafka_conn_id") or "kafka_default"))
    except Exception:
        bootstrap = "<bootstrap>"
    error = context.get("exception") or context.get("reason")
    return run_summary_text(dag_id=str(dag_id), run_id=str(run_id), state=state or "failed",
                            failed_tasks=_failed_tasks(context), error=str(error) if error else None,
                            record=record, bootstrap=bootstrap)


def run_notifiers(event: str, dag_id: str) -> list[KafkaReassignNotifier] | None:
    """The notifiers configured for a DAG's ``failure`` or ``success`` (cheap: config only).

    ``[kafka_reassign] <dag_id>_notify_on_<event>`` or else ``notify_on_<event>``: channels
    separated by ``;`` (``smtp:ops@x.org,oncall@x.org; slack:#kafka``). Empty: None (no callback
    at all, so the scheduler sends none).

    :param event: "failure" or "success"
    :param dag_id: the DAG the notifiers are for
    """
    from airflow.configuration import conf

    value = conf.get("kafka_reassign", f"{dag_id}_notify_on_{event}", fallback=None)
    if value is None:
        value = conf.get("kafka_reassign", f"notify_on_{event}", fallback="")
    channels = [c.strip() for c in (value or "").split(";") if c.strip()]
    if not channels:
        return None
    return [KafkaReassignNotifier(
        channels=channels, smtp_conn_id=conf.get("kafka_reassign", "notify_smtp_conn_id", fallback=None) or None,
        slack_conn_id=conf.get("kafka_reassign", "notify_slack_conn_id", fallback="slack_api_default"))]
