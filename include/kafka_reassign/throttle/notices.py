"""Words for people: what a failed or finished run left on the cluster and how to clean it.

Used by the Airflow notifiers (mail, Slack...) and anything else that tells a person about a
run. Plain data in, plain text out; no Airflow and no Kafka client here.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from kafka_reassign.throttle.record import ThrottleRecord
from kafka_reassign.throttle.specs import ConfigChange

RECONCILER_DAG_ID = "kafka_throttle_reconciler"


def leftover_changes(record: ThrottleRecord | None) -> list[ConfigChange]:
    """The throttle writes of a run that are still in force (its record is not restored)."""
    if record is None or record.restored:
        return []
    from kafka_reassign.throttle.restore import MOVES_PENDING

    left = [c for c in record.changes if c.value != c.prior]
    if record.pending and MOVES_PENDING not in record.pending:
        # A partial restore: only the resources it could not reach still carry the throttle.
        left = [c for c in left if f"{c.resource_type} {c.name}" in record.pending]
    return left


def _undo_command(resource_type: str, name: str, changes: Iterable[ConfigChange], bootstrap: str) -> str:
    """The kafka-configs.sh line that puts one resource's keys back to their recorded prior values."""
    entity = "brokers" if resource_type == "broker" else "topics"
    # kafka-configs.sh needs values holding commas (throttled-replica lists) in brackets.
    adds = [f"{c.key}=[{c.prior}]" if "," in c.prior else f"{c.key}={c.prior}"
            for c in changes if c.prior is not None]
    deletes = [c.key for c in changes if c.prior is None]
    parts = [f"kafka-configs.sh --bootstrap-server {bootstrap} --entity-type {entity} --entity-name {name} --alter"]
    if adds:
        parts.append("--add-config '" + ",".join(adds) + "'")
    if deletes:
        parts.append("--delete-config " + ",".join(deletes))
    return " ".join(parts)


def leftover_throttle_text(record: ThrottleRecord | None, bootstrap: str = "<bootstrap>") -> list[str]:
    """Lines saying which brokers and topics still carry this run's throttle, and how to clean it.

    :param record: the run's throttle record (None: the run set no throttle)
    :param bootstrap: the cluster's bootstrap servers, for the commands shown
    """
    changes = leftover_changes(record)
    if not changes or record is None:
        return []
    by_resource: dict[tuple[str, str], list[ConfigChange]] = defaultdict(list)
    for c in changes:
        by_resource[(c.resource_type, c.name)].append(c)
    brokers = sorted((n for t, n in by_resource if t == "broker"), key=lambda n: (len(n), n))
    topics = sorted(n for t, n in by_resource if t == "topic")
    lines = [f"Throttle left behind by run {record.run_id}: "
             + "; ".join(filter(None, [f"broker(s) {', '.join(brokers)}" if brokers else "",
                                       f"topic(s) {', '.join(topics)}" if topics else ""])) + ".",
             "Replication on those brokers stays capped until it is removed. To clean it:",
             f"  - trigger the {RECONCILER_DAG_ID} DAG (restores every unrestored record to its prior values), or",
             "  - by hand, exactly as recorded:"]
    for (rtype, name), group in sorted(by_resource.items()):
        lines.append("      " + _undo_command(rtype, name, group, bootstrap))
    return lines


def run_summary_text(*, dag_id: str, run_id: str, state: str, failed_tasks: Iterable[str] = (),
                     error: str | None = None, record: ThrottleRecord | None = None,
                     bootstrap: str = "<bootstrap>", url: str | None = None) -> tuple[str, str]:
    """(subject, body) of a message about a run.

    :param state: "failed" or "success" (or any run state)
    :param failed_tasks: ids of the tasks that failed
    :param error: the exception text, when known
    :param record: the run's throttle record, to report leftovers
    :param url: link to the run in the Airflow UI
    """
    leftovers = leftover_throttle_text(record, bootstrap)
    subject = f"[kafka-reassign] {dag_id} {run_id}: {state.upper()}"
    if leftovers:
        subject += " - THROTTLE LEFT ON THE CLUSTER"
    body = [f"DAG {dag_id}, run {run_id}: {state}."]
    failed = list(failed_tasks)
    if failed:
        body.append(f"Failed task(s): {', '.join(failed)}.")
    if error:
        body.append(f"Error: {error}")
    body.extend(leftovers or (["No throttle of this run is left on the cluster."] if record is not None else []))
    if url:
        body.append(f"Run: {url}")
    return subject, "\n".join(body)
