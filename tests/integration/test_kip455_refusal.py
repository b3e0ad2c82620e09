"""A cluster without KIP-455 (Kafka older than 2.4) is refused in one line, before any write.

The simulator plays such a cluster by leaving AlterPartitionReassignments (45) and
ListPartitionReassignments (46) out of its ApiVersions answer and refusing them like an
unknown API, as a 2.3 broker would.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin, UnsupportedClusterError
from kafka_reassign.cli.main import main

REFUSAL = ("kafka-reassign: this cluster's brokers do not support KIP-455 reassignments "
           "(AlterPartitionReassignments, ListPartitionReassignments, Kafka 2.4+); nothing was written: "
           "upgrade the brokers to Kafka 2.4 or later")
PLAN = [{"topic": "orders", "partition": 0, "replicas": [4, 5, 1]}]
FAST = ["--poll-interval-seconds", "0.05", "--stall-window-seconds", "10", "--batch-timeout-minutes", "1"]


def _cluster(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict], hidden: tuple[int, ...]) -> Any:
    return sim_cluster(snapshot_factory(brokers=5, racks=2, topics={
        "orders": {"partitions": 2, "rf": 3, "size_bytes": 1_000_000}}), hidden_api_keys=hidden)


@pytest.fixture
def pre_24(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]) -> Any:
    """A simulated cluster whose brokers advertise neither key 45 nor key 46."""
    return _cluster(sim_cluster, snapshot_factory, (45, 46))


def _plan(tmp_path: Path) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": PLAN}))
    return str(path)


def test_validate_refuses_in_one_line(pre_24, tmp_path, capsys) -> None:
    rc = main(["validate", "--bootstrap-server", pre_24.bootstrap_servers, "--plan", _plan(tmp_path)])
    captured = capsys.readouterr()
    assert rc == 2
    assert captured.err.splitlines() == [REFUSAL]
    assert captured.out == ""
    assert pre_24.write_count == 0


def test_execute_refuses_in_one_line_before_any_write(pre_24, tmp_path, capsys) -> None:
    rc = main(["execute", "--bootstrap-server", pre_24.bootstrap_servers, "--plan", _plan(tmp_path),
               "--throttle", "5000000", "--record-dir", str(tmp_path / "rec"), *FAST])
    captured = capsys.readouterr()
    assert rc == 2
    assert captured.err.splitlines() == [REFUSAL]
    assert "run id" not in captured.out  # refused before the run started
    assert pre_24.write_count == 0
    assert pre_24.broker_configs(4) == {} and pre_24.topic_configs("orders") == {}  # no throttle set
    assert pre_24.partition_state("orders", 0)["replicas"] == [1, 2, 3]


def test_the_admin_layer_refuses_at_connect(pre_24) -> None:
    with pytest.raises(UnsupportedClusterError) as info:
        KafkaAdmin(bootstrap_servers=pre_24.bootstrap_servers)
    assert str(info.value) == REFUSAL.removeprefix("kafka-reassign: ")
    assert info.value.error_name == "UNSUPPORTED_VERSION"


def test_only_one_missing_key_is_named(sim_cluster, snapshot_factory) -> None:
    """A broker lacking only ListPartitionReassignments is refused too, naming just that API."""
    cluster = _cluster(sim_cluster, snapshot_factory, (46,))
    with pytest.raises(UnsupportedClusterError, match=r"\(ListPartitionReassignments, Kafka 2\.4\+\)"):
        KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)


def test_a_cluster_with_kip455_is_not_refused(sim_cluster, snapshot_factory) -> None:
    cluster = _cluster(sim_cluster, snapshot_factory, ())
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        assert admin.list_partition_reassignments() == {}
