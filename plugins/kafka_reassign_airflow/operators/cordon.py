"""Cordons of a remove-brokers run (KIP-1066, Kafka 4.3+): set by ``throttle_set``, undone by the teardown.

The leaving brokers are cordoned before the first move, so no new topic lands on a broker being
drained. After a successful run they stay cordoned (the brokers are leaving); when ``execute``
did not succeed (failed, cancelled, marked failed by hand) the teardown puts back the value each
broker had, from the run's own cordon records. On a cluster without cordons one warning says so
and the run goes on as before.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

from kafka_reassign_airflow.operators.common import run_params

if TYPE_CHECKING:
    from airflow.sdk import Context

    from kafka_reassign.cluster.port import KafkaAdminPort
    from kafka_reassign.throttle.record import RecordStoreBase

log = logging.getLogger(__name__)
#: Task states after which a run's cordons are kept (the drain went through).
KEEP_AFTER = {"success"}


def leaving_brokers(params: dict[str, Any]) -> list[int]:
    """The brokers a remove-brokers run drains (none when a plan is given: the goal is not used)."""
    if params.get("goal") != "remove-brokers" or params.get("plan") is not None:
        return []
    return sorted({int(b) for b in params.get("brokers") or []})


def cordon_leaving(context: Context, admin: KafkaAdminPort, store: RecordStoreBase) -> None:
    """Cordon the brokers the run drains, prior values recorded first; refusals fail the task, nothing written."""
    from kafka_reassign.cluster.cordons import cordon_support
    from kafka_reassign.throttle.cordon import CordonError, cordon_brokers

    brokers = leaving_brokers(run_params(context))
    if not brokers:
        return
    support = cordon_support(admin)
    if support.supported is False:
        log.warning("Brokers %s are not cordoned: %s", brokers, support.note)
        return
    run_id = context["run_id"]
    try:
        # A sole in-sync replica on a leaving broker is no reason to refuse: this run moves it
        # off, and a cordon only keeps new replicas away (the CLI refuses it without a flag).
        result = cordon_brokers(admin, store, admin.cluster_state(), brokers,
                                by=f"run {run_id} (remove-brokers)", run_id=run_id, allow_sole_isr=True)
    except CordonError as exc:
        raise AirflowFailException(str(exc)) from exc
    log.info("Cordoned the leaving brokers %s (they stay cordoned after success; restored on failure):\n%s",
             brokers, "\n".join(result.lines()))


def release_unless_done(context: Context, admin: KafkaAdminPort, store: RecordStoreBase,
                        execute_task_id: str) -> None:
    """Put back the run's cordons unless ``execute`` succeeded."""
    from kafka_reassign.throttle.cordon import release_run_cordons, run_cordon_ids

    if not run_cordon_ids(store, context["run_id"]):
        return  # the run cordoned nothing (not remove-brokers, or an older cluster)
    ti = context["ti"]
    states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[execute_task_id], run_ids=[ti.run_id])
    done = {str(getattr(s, "value", s)) for s in states.get(ti.run_id, {}).values()}
    if done and done <= KEEP_AFTER:
        return
    results = release_run_cordons(admin, store, context["run_id"])
    for record_id, res in results.items():
        log.info("Cordon %s put back (%s):\n%s", record_id, "execute did not succeed",
                 "\n".join(c.describe() for c in res.changes) or "(already as before)")
        if not res.done:
            raise AirflowFailException(f"cordon {record_id} not restored: {res.message()}")
