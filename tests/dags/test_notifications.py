"""Notifier channels: checked when the DAG is parsed, delivered independently."""
from __future__ import annotations

import pytest

from kafka_reassign_airflow.notifications import KafkaReassignNotifier, run_notifiers


def test_channels_are_checked_when_the_dag_is_parsed():
    with pytest.raises(ValueError, match="needs apache-airflow-providers-slack"):
        KafkaReassignNotifier(channels=["slack:#kafka-ops"])
    with pytest.raises(ValueError, match="give the address"):
        KafkaReassignNotifier(channels=["smtp:"])
    with pytest.raises(ValueError, match="expected one of"):
        KafkaReassignNotifier(channels=["pager:ops"])


def test_one_broken_channel_does_not_silence_the_others(airflow_db):
    got = []

    def broken(subject, body):
        raise OSError("mail relay down")

    notifier = KafkaReassignNotifier(channels=[broken, lambda s, b: got.append((s, b))])
    notifier.notify({"run_id": "r1", "reason": "task_failure", "params": {"kafka_conn_id": "no_such_conn"}})
    assert len(got) == 1 and got[0][0].startswith("[kafka-reassign] ? r1: FAILED")


def test_configured_per_dag_with_a_global_fallback(monkeypatch):
    assert run_notifiers("failure", "kafka_reassign") is None  # nothing configured: no callback at all
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__NOTIFY_ON_FAILURE", "log")
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__KAFKA_REBALANCE_NOTIFY_ON_FAILURE", "smtp:a@example.com; log")
    assert run_notifiers("failure", "kafka_reassign")[0].channels == ["log"]
    assert run_notifiers("failure", "kafka_rebalance")[0].channels == ["smtp:a@example.com", "log"]
