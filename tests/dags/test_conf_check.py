"""Trigger-time checks of a whole conf (rules spanning params), in the DAG's own param names."""
from __future__ import annotations

import pytest

from kafka_reassign_airflow.conf_check import conf_problems, is_reassignment_dag
from kafka_reassign_airflow.params import reassign_params

PLAN = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}


@pytest.fixture(scope="module")
def defaults():
    return {k: p.value for k, p in reassign_params().items()}


def test_a_plan_or_a_goal_is_enough(defaults):
    assert is_reassignment_dag(defaults)
    assert conf_problems("kafka_reassign", defaults, {"plan": PLAN}) == []
    assert conf_problems("kafka_reassign", defaults, {"goal": "rebalance"}) == []
    assert conf_problems("kafka_reassign", defaults, {"goal": "remove-brokers", "brokers": [4]}) == []


@pytest.mark.parametrize("conf, message", [
    ({}, "give either 'plan' (a reassignment JSON) or 'goal'"),
    ({"plan": None, "goal": None}, "both are empty"),
    ({"goal": "remove-brokers"}, "goal 'remove-brokers' needs 'brokers': the ids of the brokers to drain"),
    ({"goal": "add-brokers", "brokers": []}, "goal 'add-brokers' needs 'brokers'"),
    ({"goal": "replication-factor"}, "needs 'replication_factor'"),
    ({"plan": PLAN, "throttle": 1000}, "unknown parameter 'throttle' - did you mean 'throttle_bytes_per_sec'?"),
    ({"plan": PLAN, "allow_rf_change": True}, "did you mean 'allow_replication_factor_change'?"),
    ({"plan": PLAN, "max_partition_movement": 3}, "did you mean 'max_partition_movements'?"),
])
def test_bad_confs_are_named_in_the_users_terms(defaults, conf, message):
    problems = conf_problems("kafka_reassign", defaults, conf)
    assert any(message in p for p in problems), problems


def test_the_plan_param_checks_the_plan_schema():
    from airflow.sdk.definitions.param import ParamValidationError

    param = reassign_params()["plan"]
    assert param.resolve(PLAN) == PLAN
    for bad in ({"version": 2, "partitions": []}, {"version": 1},
                {"version": 1, "partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]},
                {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["d"]}]}):
        with pytest.raises(ParamValidationError):
            param.resolve(bad)
