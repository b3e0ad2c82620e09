"""Cordons (KIP-1066) on the real Kafka 4.3.1 cluster, through the CLI.

Broker 6 starts with an operator's own value (one of its two log dirs cordoned), so uncordon
has a real prior value to put back. ``kafka-reassign cordon --brokers 6`` cordons every dir:
DescribeLogDirs v5 then reports both dirs cordoned, the controller places none of a new topic's
replicas there, and ``uncordon`` puts back exactly the operator's value (same source). A broker
holding the only in-sync replica of a partition is refused, naming it, with nothing written.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafka_local.load import create_topic, wait_leaders
from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.cluster.cordons import CORDON_ALL, CORDONED_LOG_DIRS, cordon_support
from real_kafka_clients import admin, alter_set, set_configs, wait_for

pytestmark = [pytest.mark.slow]

CLI = str(Path(sys.executable).parent / "kafka-reassign")
CORDONED = 6


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


def broker_value(bootstrap: str, broker: int) -> str | None:
    """The broker's own (dynamic, per-broker) cordoned.log.dirs, None when not set."""
    return set_configs(admin(bootstrap), [broker], [])[f"broker {broker}"].get(CORDONED_LOG_DIRS)


def create_unassigned(bootstrap: str, topic: str, partitions: int, rf: int) -> dict[int, list[int]]:
    """Create ``topic`` letting the controller place the replicas; return its placement."""
    from kafka.admin import KafkaAdminClient, NewTopic
    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="cordon-test")
    try:
        client.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf)])
    finally:
        client.close()
    wait_leaders(bootstrap, topic, partitions)
    with KafkaAdmin(bootstrap_servers=bootstrap) as ka:
        meta = ka.topic_metadata([topic])[0]
    return {p.partition: list(p.replicas) for p in meta.partitions}


def cordoned_by_describe_log_dirs(bootstrap: str) -> dict[int, Any]:
    with KafkaAdmin(bootstrap_servers=bootstrap) as ka:
        assert cordon_support(ka).supported is True  # Kafka 4.3.1: DescribeLogDirs v5
        state = ka.cluster_state()
    return {b: (sorted(info.cordoned_dirs), info.log_dirs) for b, info in state.brokers.items()}


def check_snapshot_and_validate(bootstrap: str, tmp_path: Path, topic: str, placement: dict[int, list[int]],
                                dirs: tuple[str, ...]) -> None:
    """While broker 6 is cordoned: the snapshot says so, and a plan moving a replica onto it is refused."""
    snap_file = tmp_path / "snap.json"
    assert run_cli("snapshot", "--bootstrap-server", bootstrap, "--out", str(snap_file)).returncode == 0
    snap = json.loads(snap_file.read_text())
    six = next(b for b in snap["brokers"] if b["id"] == CORDONED)
    assert sorted(d["path"] for d in six["log_dirs"] if d.get("cordoned")) == sorted(dirs)
    plan = tmp_path / "onto6.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [CORDONED, *placement[0][1:]]}]}))
    refused = run_cli("validate", "--bootstrap-server", bootstrap, "--plan", str(plan))
    assert refused.returncode == 2 and f"broker {CORDONED} is cordoned" in refused.stderr, refused.stderr


def test_cordon_keeps_new_replicas_off_a_broker_and_uncordon_restores_the_prior_value(
        real_bootstrap, topic_name, tmp_path) -> None:
    records = str(tmp_path / "records")
    dirs = cordoned_by_describe_log_dirs(real_bootstrap)[CORDONED][1]
    assert len(dirs) == 2
    operator_value = dirs[0]
    alter_set(admin(real_bootstrap), "broker", str(CORDONED), {CORDONED_LOG_DIRS: operator_value})
    try:
        before = cordoned_by_describe_log_dirs(real_bootstrap)
        assert before[CORDONED][0] == [operator_value]

        done = run_cli("cordon", "--bootstrap-server", real_bootstrap, "--brokers", str(CORDONED),
                       "--record-dir", records)
        assert done.returncode == 0, done.stderr
        assert f"(was {operator_value!r})" in done.stdout
        assert broker_value(real_bootstrap, CORDONED) == CORDON_ALL
        after = cordoned_by_describe_log_dirs(real_bootstrap)
        assert after[CORDONED][0] == sorted(dirs)  # IsCordoned on both dirs
        assert all(not after[b][0] for b in after if b != CORDONED)

        topic = topic_name("cordon-new")
        placement = create_unassigned(real_bootstrap, topic, partitions=12, rf=3)
        assert len(placement) == 12
        on_cordoned = {p: r for p, r in placement.items() if CORDONED in r}
        assert not on_cordoned, f"the controller placed replicas on cordoned broker {CORDONED}: {on_cordoned}"
        check_snapshot_and_validate(real_bootstrap, tmp_path, topic, placement, dirs)

        undone = run_cli("uncordon", "--bootstrap-server", real_bootstrap, "--brokers", str(CORDONED),
                         "--record-dir", records)
        assert undone.returncode == 0, undone.stderr + undone.stdout
        assert broker_value(real_bootstrap, CORDONED) == operator_value  # exactly the prior, still per-broker
        assert cordoned_by_describe_log_dirs(real_bootstrap)[CORDONED][0] == [operator_value]
        again = run_cli("uncordon", "--bootstrap-server", real_bootstrap, "--brokers", str(CORDONED),
                        "--record-dir", records)
        assert again.returncode == 2 and "no cordon of broker 6" in again.stderr
    finally:
        alter_set(admin(real_bootstrap), "broker", str(CORDONED), {CORDONED_LOG_DIRS: None})
    # a broker answers from its copy of the metadata, which catches up with the delete a moment later
    wait_for(lambda: broker_value(real_bootstrap, CORDONED) is None, 10, "broker 6's cordon value deleted")


def test_cordoning_the_only_in_sync_replica_is_refused_with_nothing_written(real_bootstrap, topic_name,
                                                                            tmp_path) -> None:
    topic = topic_name("cordon-sole")
    create_topic(real_bootstrap, topic, {0: [5], 1: [4]})
    refused = run_cli("cordon", "--bootstrap-server", real_bootstrap, "--brokers", "5",
                      "--record-dir", str(tmp_path / "records"))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "nothing was written" in refused.stderr and f"{topic}-0" in refused.stderr
    assert f"{topic}-1" not in refused.stderr  # its only replica is on broker 4, not cordoned
    assert broker_value(real_bootstrap, 5) is None
    assert not list((tmp_path / "records").glob("*.json"))


class _TaskInstance:
    """What the teardown asks Airflow: the state of the run's execute task."""

    dag_id, run_id = "kafka_reassign", "manual__cordon-real"

    def __init__(self, execute_state: str) -> None:
        self.execute_state = execute_state

    def get_task_states(self, dag_id: str, task_ids: list[str], run_ids: list[str]) -> dict[str, dict[str, str]]:
        return {self.run_id: {"execute": self.execute_state}}


@pytest.mark.parametrize("execute_state", ["failed", "success"])
def test_remove_brokers_run_cordons_the_leaving_brokers_and_puts_back_the_prior_values_unless_done(
        real_bootstrap, execute_state) -> None:
    """The DAG's path (operators/cordon.py) with a real admin: the leaving brokers 5 and 6 are
    cordoned before the first move; a failed execute puts back broker 5's operator value and
    deletes broker 6's (it had none); a successful one leaves both cordoned."""
    from kafka_reassign.throttle.record import MemoryRecordStore
    from kafka_reassign_airflow.operators.cordon import cordon_leaving, release_unless_done

    dirs = cordoned_by_describe_log_dirs(real_bootstrap)[5][1]
    alter_set(admin(real_bootstrap), "broker", "5", {CORDONED_LOG_DIRS: dirs[1]})
    # the run must read the operator's value as its prior one: wait until the broker answers with it
    wait_for(lambda: broker_value(real_bootstrap, 5) == dirs[1], 10, "broker 5's operator cordon")
    ti = _TaskInstance(execute_state)
    context: Any = {"params": {"goal": "remove-brokers", "brokers": [5, 6], "plan": None},
                    "run_id": ti.run_id, "ti": ti}
    store = MemoryRecordStore()
    try:
        with KafkaAdmin(bootstrap_servers=real_bootstrap) as ka:
            cordon_leaving(context, ka, store)
        assert broker_value(real_bootstrap, 5) == CORDON_ALL and broker_value(real_bootstrap, 6) == CORDON_ALL
        with KafkaAdmin(bootstrap_servers=real_bootstrap) as ka:
            release_unless_done(context, ka, store, "execute")
        if execute_state == "success":
            assert broker_value(real_bootstrap, 5) == CORDON_ALL and broker_value(real_bootstrap, 6) == CORDON_ALL
        else:
            assert broker_value(real_bootstrap, 5) == dirs[1] and broker_value(real_bootstrap, 6) is None
            assert cordoned_by_describe_log_dirs(real_bootstrap)[5][0] == [dirs[1]]
    finally:
        for broker in (5, 6):
            alter_set(admin(real_bootstrap), "broker", str(broker), {CORDONED_LOG_DIRS: None})
    wait_for(lambda: broker_value(real_bootstrap, 5) is None and broker_value(real_bootstrap, 6) is None, 10,
             "the test's cordon values deleted")
