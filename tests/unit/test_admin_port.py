"""The admin port: who implements it, how KafkaAdmin assembles the cluster state, the cluster layer's imports.

No Kafka here: KafkaAdmin's requests are replaced by canned answers (tests/integration/test_admin.py
drives the real requests against the simulator).
"""
from __future__ import annotations

import ast
from pathlib import Path

from types import SimpleNamespace

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.cluster.config_source import Inherited
from kafka_reassign.cluster.metadata import BrokerNode, ClusterDescription, PartitionMetadata, TopicMetadata
from kafka_reassign.cluster.port import ClusterReader, KafkaAdminPort
from kafka_reassign.cluster.state import DirSpace, InFlight, ReplicaLogDir
from kafka_reassign.planning.preflight import SnapshotView

CLUSTER_DIR = Path(__file__).resolve().parents[2] / "include" / "kafka_reassign" / "cluster"


class CannedAdmin(KafkaAdmin):
    """A KafkaAdmin whose requests answer from fixtures (no connection)."""

    def __init__(self) -> None:  # noqa: D107 - skips connecting on purpose
        self._client = None
        self.retry_attempts, self.retry_max_seconds = 1, 1.0

    def describe_cluster(self) -> ClusterDescription:
        return ClusterDescription("c1", 1, (BrokerNode(1, "h", 9092, rack="a"), BrokerNode(2, "h", 9093, rack="b")))

    def list_partition_reassignments(self, partitions=None):
        return {("orders", 0): InFlight((1, 2, 3), (3,), ())}

    def topic_metadata(self, topics=None):
        return [TopicMetadata("orders", (PartitionMetadata(0, 1, (1, 2, 3), (1, 2)),
                                         PartitionMetadata(1, -1, (2, 1), (2,)))),
                TopicMetadata("gone", (), error="UNKNOWN_TOPIC_OR_PARTITION")]

    def _topic_min_isr(self, topics):
        return {"orders": {"min.insync.replicas": "2"}}

    def _broker_default_min_isr(self, broker_id):
        return 1

    def _log_dirs_at_once(self, args):
        def log_dir(path, total, usable, parts, error_code=0, **extra):
            topics = [SimpleNamespace(name="orders", partitions=[
                SimpleNamespace(partition_index=i, partition_size=size, offset_lag=0, is_future_key=fut)
                for i, size, fut in parts])]
            return SimpleNamespace(error_code=error_code, log_dir=path, total_bytes=total, usable_bytes=usable,
                                   topics=topics, **extra)
        # Broker 1 reports no usable bytes (-1, before DescribeLogDirs v4) and no is_cordoned (before v5).
        return {1: [log_dir("/d1", 1000, -1, [(0, 500, False), (1, 90, False)]),
                    log_dir("/gone", 0, 0, [(0, 1, False)], error_code=57)],  # an offline dir: skipped
                2: [log_dir("/d2", 2000, 0, [(0, 400, False), (1, 70, False)], is_cordoned=False),
                    log_dir("/d3", 3000, 1200, [(0, 10, True)], is_cordoned=True)]}  # future: not current

def test_kafka_admin_and_its_stand_ins_implement_the_port():
    admin = CannedAdmin()
    assert isinstance(admin, KafkaAdminPort) and isinstance(admin, ClusterReader)
    view = SnapshotView({"version": 1, "brokers": [], "topics": []})
    assert isinstance(view, ClusterReader)
    assert not isinstance(view, KafkaAdminPort)  # a snapshot cannot be written to


def test_cluster_state_is_assembled_from_the_reads():
    state = CannedAdmin().cluster_state()
    assert (state.cluster_id, state.controller_id, state.default_min_isr) == ("c1", 1, 1)
    assert sorted(state.brokers) == [1, 2, 3]
    assert not state.brokers[3].alive and state.brokers[3].log_dirs == ()  # named by a replica, not registered
    assert state.brokers[2].log_dirs == ("/d2", "/d3") and state.brokers[2].capacity_bytes == {"/d2": 2000, "/d3": 3000}
    assert state.brokers[1].log_dirs == ("/d1",) and state.brokers[1].capacity_bytes == {"/d1": 1000}
    # KIP-827 usable bytes: 0 is a full volume, -1 (broker 1: DescribeLogDirs before v4) not reported
    assert state.brokers[2].usable_bytes == {"/d2": 0, "/d3": 1200} and state.brokers[1].usable_bytes == {}
    # DescribeLogDirs v5 IsCordoned: /d3 cordoned, /d2 not, so broker 2 still takes new replicas
    assert state.brokers[2].cordoned_dirs == {"/d3"} and not state.brokers[2].cordoned
    assert state.brokers[1].cordoned_dirs == frozenset()
    assert sorted(state.topics) == ["orders"]  # a topic Metadata answered with an error is left out
    p0, p1 = state.partition("orders", 0), state.partition("orders", 1)
    assert p0.size_bytes == 500 and p0.offline == (3,) and p0.replica_dirs == {1: "/d1", 2: "/d2"}
    assert p1.size_bytes == 90  # no leader: the largest replica
    assert state.topics["orders"].configs == {"min.insync.replicas": "2"}
    assert state.in_flight[("orders", 0)].adding == (3,)


def test_log_dir_rows_are_every_replica_of_each_answering_dir():
    assert CannedAdmin().describe_log_dirs() == [
        ReplicaLogDir(1, "/d1", "orders", 0, 500, 0, False), ReplicaLogDir(1, "/d1", "orders", 1, 90, 0, False),
        ReplicaLogDir(2, "/d2", "orders", 0, 400, 0, False), ReplicaLogDir(2, "/d2", "orders", 1, 70, 0, False),
        ReplicaLogDir(2, "/d3", "orders", 0, 10, 0, True)]


def test_inherited_has_one_home_in_the_cluster_layer():
    from kafka_reassign.throttle import specs
    assert specs.Inherited is Inherited


@pytest.mark.parametrize("path", sorted(CLUSTER_DIR.glob("*.py")), ids=lambda p: p.name)
def test_the_cluster_layer_imports_nothing_above_it(path: Path):
    above = ("kafka_reassign.throttle", "kafka_reassign.execution", "kafka_reassign.planning",
             "kafka_reassign.run", "kafka_reassign.rehearsal", "kafka_reassign.cli")
    names = [n.module or "" for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if n.startswith(above)]
