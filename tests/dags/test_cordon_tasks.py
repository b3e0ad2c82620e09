"""The cordons of a remove-brokers run (operators/cordon.py): set before the first move by
throttle_set, kept after a successful execute, put back by the teardown otherwise."""
from __future__ import annotations

from typing import Any

import pytest

from cordon_sim import D1, CordonCluster, cordon_snapshot
from kafka_reassign.cluster.cordons import CORDON_ALL
from kafka_reassign.throttle.record import MemoryRecordStore


class FakeTI:
    dag_id, run_id = "kafka_reassign", "manual__1"

    def __init__(self, execute_state: str | None) -> None:
        self.execute_state = execute_state

    def get_task_states(self, dag_id: str, task_ids: list[str], run_ids: list[str]) -> dict[str, dict[str, str]]:
        assert task_ids == ["execute"] and run_ids == [self.run_id]
        return {self.run_id: {"execute": self.execute_state}} if self.execute_state else {}


def context(params: dict[str, Any], execute_state: str | None = None) -> Any:
    return {"params": params, "run_id": FakeTI.run_id, "ti": FakeTI(execute_state)}


@pytest.fixture
def kafka(sim_cluster):
    """Factory: a CordonCluster on six brokers (closed after the test)."""
    opened: list[CordonCluster] = []

    def start(**kwargs: Any) -> CordonCluster:
        snapshot = cordon_snapshot(brokers=6, sole_isr_on=kwargs.pop("sole_isr_on", None))
        opened.append(CordonCluster(sim_cluster, snapshot, **kwargs))
        return opened[-1]

    yield start
    for c in opened:
        c.close()


REMOVE = {"goal": "remove-brokers", "brokers": [5, 6], "plan": None}


def test_only_a_planned_remove_brokers_run_cordons():
    from kafka_reassign_airflow.operators.cordon import leaving_brokers
    assert leaving_brokers(REMOVE) == [5, 6]
    assert leaving_brokers({**REMOVE, "plan": {"version": 1, "partitions": []}}) == []  # goal unused
    assert leaving_brokers({"goal": "rebalance", "brokers": [5], "plan": None}) == []


@pytest.mark.parametrize("execute_state,kept", [("success", True), ("failed", False), (None, False)])
def test_cordons_stay_after_success_and_are_put_back_otherwise(kafka, execute_state, kept):
    from kafka_reassign_airflow.operators.cordon import cordon_leaving, release_unless_done
    k = kafka(own={5: D1})
    store = MemoryRecordStore()
    cordon_leaving(context(REMOVE), k.admin, store)
    assert k.own(5, 6) == {5: CORDON_ALL, 6: CORDON_ALL}
    release_unless_done(context(REMOVE, execute_state), k.admin, store, "execute")
    assert k.own(5, 6) == ({5: CORDON_ALL, 6: CORDON_ALL} if kept else {5: D1, 6: None})


def test_a_refused_cordon_fails_the_task_with_nothing_written(kafka):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_reassign_airflow.operators.cordon import cordon_leaving
    k = kafka()
    with pytest.raises(AirflowFailException, match="99"):
        cordon_leaving(context({**REMOVE, "brokers": [5, 99]}), k.admin, MemoryRecordStore())
    assert k.writes == 0 and k.validated == 0


def test_a_sole_in_sync_replica_on_a_leaving_broker_does_not_stop_its_cordon(kafka):
    """The run moves that replica off; the cordon only keeps new ones away."""
    from kafka_reassign_airflow.operators.cordon import cordon_leaving
    k = kafka(sole_isr_on=6)
    cordon_leaving(context(REMOVE), k.admin, MemoryRecordStore())
    assert k.own(5, 6) == {5: CORDON_ALL, 6: CORDON_ALL}


def test_an_older_cluster_is_not_cordoned_and_the_run_goes_on(kafka):
    from kafka_reassign_airflow.operators.cordon import cordon_leaving
    k = kafka(cordons=False)  # a Kafka 4.1 cluster: DescribeLogDirs v4
    cordon_leaving(context(REMOVE), k.admin, MemoryRecordStore())
    assert k.writes == 0 and k.validated == 0
