"""Every Kafka API the tool sends, at the version kafka-python negotiates with Apache Kafka 4.3.1.

Each test drives the tool's own admin layer (:class:`kafka_reassign.cluster.admin.KafkaAdmin`) while
:mod:`api_recorder` logs the (api_key, api_version) of every request written to a connection.
Each asserts that every pair is inside the range the brokers advertised in ApiVersions, that
no response carried UNSUPPORTED_VERSION and no request lost its connection (Kafka 4.x closes
the connection on a removed version, KIP-896), and that the pairs it sent are exactly the rows
of docs/KAFKA_APIS.md naming it: the document is parsed here, so it cannot drift.
"""
from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from api_recorder import ApiRecorder, recording
from kafka_local.load import create_topic, fill
from kafka_reassign.cluster.admin import KafkaAdmin

DOC = Path(__file__).resolve().parents[2] / "docs" / "KAFKA_APIS.md"
#: A topic config no test of the group checks and that no broker default depends on.
SAFE_TOPIC_KEY = "retention.ms"
#: KafkaAdmin's default client id.
TOOL_CLIENT_ID = "kafka-reassign"


@dataclass(frozen=True)
class DocRow:
    """One row of a table in docs/KAFKA_APIS.md."""

    api: str
    key: int
    version: int
    broker_range: tuple[int, int]
    tests: tuple[str, ...]


def _table(marker: str) -> list[DocRow]:
    """Rows between ``<!-- marker:start -->`` and ``<!-- marker:end -->`` of the document."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 6 or not cells[1].isdigit():
            continue  # header, separator, prose
        lo, hi = (int(x) for x in re.findall(r"\d+", cells[3])[:2])
        tests = tuple(re.findall(r"test_\w+", cells[5]))
        rows.append(DocRow(cells[0].strip("`"), int(cells[1]), int(cells[2]), (lo, hi), tests))
    assert rows, f"no rows between the {marker} markers of {DOC}"
    return rows


def _documented_for(test: str) -> set[tuple[int, int]]:
    return {(r.key, r.version) for r in _table("api-table") if test in r.tests}


@pytest.fixture
def admin(real_bootstrap: str) -> Iterator[tuple[KafkaAdmin, ApiRecorder]]:
    """The tool's admin layer, connected while the recorder runs (ApiVersions and bootstrap included)."""
    # Only the tool's connections (client id kafka-reassign): set-up clients (create_topic) are not the tool.
    with recording(client_id=TOOL_CLIENT_ID) as rec:
        adm = KafkaAdmin(bootstrap_servers=real_bootstrap, client_id=TOOL_CLIENT_ID, retry_attempts=3,
                         retry_max_seconds=30)
        try:
            yield adm, rec
        finally:
            adm.close()


def _check(rec: ApiRecorder, test: str) -> None:
    """In range on every broker that answered ApiVersions, nothing refused, and what the document says."""
    assert rec.advertised, "no ApiVersions answer was recorded"
    for node, ranges in rec.advertised.items():
        for key, version in rec.pairs():
            assert key in ranges, f"broker {node} does not advertise API key {key}"
            lo, hi = ranges[key]
            assert lo <= version <= hi, f"API key {key} v{version} outside broker {node}'s range {lo}..{hi}"
    assert rec.unsupported() == [], f"UNSUPPORTED_VERSION in responses: {rec.unsupported()}"
    assert rec.failures == [], f"requests without a response (a removed version closes the connection): {rec.failures}"
    documented = _documented_for(test)
    assert rec.pairs() == documented, (f"{test} sent {sorted(rec.pairs())} but {DOC.name} lists "
                                      f"{sorted(documented)} for it ({rec.names()})")


def _wait(what: str, done: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what}: not done after {timeout:.0f} s"
        time.sleep(0.25)


@pytest.fixture
def small_topic(real_bootstrap: str, topic_name: Callable[[str], str]) -> str:
    """A 2-partition RF3 topic with a little data, made before the recorder runs (its client is not the tool's)."""
    # The pid keeps names unique when a kept cluster (KAFKA_LOCAL_DIR) outlives the session's counter.
    name = topic_name(f"apiv{os.getpid()}")
    create_topic(real_bootstrap, name, {0: [1, 2, 3], 1: [4, 5, 6]})
    fill(real_bootstrap, name, {0: 200_000, 1: 100_000})
    return name


def test_cluster_reads(admin, small_topic) -> None:
    """Connect, DescribeCluster, Metadata, ListPartitionReassignments, DescribeConfigs, DescribeLogDirs."""
    adm, rec = admin
    assert sorted(adm.describe_cluster().alive) == [1, 2, 3, 4, 5, 6]
    (meta,) = adm.topic_metadata([small_topic])
    assert meta.error is None and meta.partitions[0].replicas == (1, 2, 3)
    state = adm.cluster_state(topics=[small_topic])
    assert state.topics[small_topic].partitions[0].size_bytes >= 200_000
    adm.list_partition_reassignments()  # all of them: another test's moves may be in flight
    assert adm.list_partition_reassignments([(small_topic, 0)]) == {}
    assert adm.describe_configs([1], [small_topic], [SAFE_TOPIC_KEY])[("topic", small_topic)] == {SAFE_TOPIC_KEY: None}
    assert not adm.read_configs([1, 2], [small_topic]).unreachable
    _check(rec, "test_cluster_reads")


def test_log_dirs_and_offsets(admin, small_topic) -> None:
    """DescribeLogDirs (the concurrent round and one broker alone) and ListOffsets (latest, earliest)."""
    adm, rec = admin
    rows = adm.describe_log_dirs([1, 2, 3], [(small_topic, 0)])
    assert sorted(r.broker for r in rows if not r.is_future) == [1, 2, 3]
    assert [r.broker for r in adm.describe_log_dirs([4], [(small_topic, 1)])] == [4]
    latest = adm.list_offsets([(small_topic, 0), (small_topic, 1)])
    assert latest[(small_topic, 0)] >= 2 and latest[(small_topic, 1)] >= 1
    assert adm.list_offsets([(small_topic, 0)], latest=False) == {(small_topic, 0): 0}
    _check(rec, "test_log_dirs_and_offsets")


def _commit(consumer, offsets: list, timeout: float = 30.0) -> None:
    """A synchronous commit, again while the group's coordinator is moving or loading (after
    earlier tests restarted brokers, the broker named coordinator may not be it yet)."""
    from confluent_kafka import KafkaError, KafkaException
    moving = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}
    deadline = time.monotonic() + timeout
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in moving or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_group_offsets(admin, small_topic, real_bootstrap) -> None:
    """ListGroups on every broker, FindCoordinator, OffsetFetch: the snapshot's consumer measurement."""
    from confluent_kafka import Consumer, TopicPartition
    adm, rec = admin
    group = f"apiv-group-{small_topic}"
    committer = Consumer({"bootstrap.servers": real_bootstrap, "group.id": group})  # not the tool's client id
    try:
        _commit(committer, [TopicPartition(small_topic, 0, 1)])
    finally:
        committer.close()
    assert adm.group_offsets()[group] == {(small_topic, 0): 1}
    _check(rec, "test_group_offsets")


@dataclass(frozen=True)
class _Change:
    """The shape :meth:`KafkaAdmin.alter_configs` takes (a throttle ConfigChange's fields)."""

    resource_type: str
    name: str
    key: str
    value: str | None


def test_config_writes(admin, small_topic) -> None:
    """IncrementalAlterConfigs SET then DELETE of a non-throttle topic key, and a broker validate-only."""
    adm, rec = admin

    def value() -> str | None:
        return adm.describe_configs([], [small_topic], [SAFE_TOPIC_KEY])[("topic", small_topic)][SAFE_TOPIC_KEY]

    # KRaft: the write is committed by the controller, but the broker answering DescribeConfigs
    # applies it from the metadata log a moment later, so a read-back right away may be stale.
    try:
        adm.alter_configs([_Change("topic", small_topic, SAFE_TOPIC_KEY, "3600000")])
        _wait("topic config set", lambda: value() == "3600000", timeout=30)
    finally:
        adm.alter_configs([_Change("topic", small_topic, SAFE_TOPIC_KEY, None)])  # leave nothing set
    _wait("topic config deleted", lambda: value() is None, timeout=30)
    # validate_only: the broker checks the change and applies nothing.
    adm.alter_configs([_Change("broker", "1", "log.cleaner.threads", "1")], validate_only=True)
    assert adm.describe_configs([1], [], ["log.cleaner.threads"])[("broker", "1")] == {"log.cleaner.threads": None}
    _check(rec, "test_config_writes")


def _log_dir(adm: KafkaAdmin, topic: str, broker: int) -> tuple[str, bool]:
    rows = adm.describe_log_dirs([broker], [(topic, 0)])
    return next(r.path for r in rows if not r.is_future), any(r.is_future for r in rows)


def test_replica_moves(admin, small_topic, local_kafka) -> None:
    """AlterPartitionReassignments, ListPartitionReassignments, AlterReplicaLogDirs, ElectLeaders."""
    adm, rec = admin
    tp = (small_topic, 0)
    assert adm.alter_partition_reassignments({tp: [1, 2, 4]}) == {tp: None}
    # the listing comes from the controller; the broker answering Metadata may apply the change a moment later
    _wait("reassignment", lambda: not adm.list_partition_reassignments([tp])
          and adm.topic_metadata([small_topic])[0].partitions[0].replicas == (1, 2, 4))
    # Cancelling a finished move: Kafka answers NO_REASSIGNMENT_IN_PROGRESS (a per-partition error, not a version one).
    assert adm.alter_partition_reassignments({tp: None}) == {tp: "NO_REASSIGNMENT_IN_PROGRESS"}
    path, _ = _log_dir(adm, small_topic, 1)
    other = next(d for d in local_kafka.brokers[1].log_dirs if d != path)  # from kafka-local, not a request
    assert adm.alter_replica_log_dirs({(small_topic, 0, 1): other}) == {(small_topic, 0, 1): None}
    _wait("log dir move", lambda: _log_dir(adm, small_topic, 1) == (other, False))
    assert adm.elect_preferred_leaders([tp]) == {tp: None}  # ELECTION_NOT_NEEDED counts as done
    _check(rec, "test_replica_moves")


def test_sasl_rows_are_what_kafka_python_would_pick(admin) -> None:
    """SASL listeners (none on kafka-local): the versions kafka-python's own negotiation picks
    from the real brokers' ranges, and that those are the ones documented."""
    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
    _, rec = admin
    ranges = next(iter(rec.advertised.values()))
    bvd = BrokerVersionData(api_versions=ranges)
    # kafka-python's SASL step caps the handshake at v1 (KafkaConnection._sasl_authenticate).
    picked = {(17, bvd.api_version(SaslHandshakeRequest(mechanism="PLAIN", max_version=1))),
              (36, bvd.api_version(SaslAuthenticateRequest))}
    rows = _table("sasl-table")
    assert {(r.key, r.version) for r in rows} == picked
    assert all(ranges[r.key] == r.broker_range for r in rows)


def test_the_document_names_only_tests_of_this_file() -> None:
    """Every row names a test here, and the broker ranges written down are those of Kafka 4.3.1 (checked above)."""
    tests = {name for name in dir(sys.modules[__name__]) if name.startswith("test_")}
    for row in _table("api-table"):
        assert row.tests and set(row.tests) <= tests, f"{row.api}: unknown test(s) {row.tests}"
        assert row.broker_range[0] <= row.version <= row.broker_range[1], row


def test_documented_ranges_are_the_brokers(admin) -> None:
    """The 'broker's supported range' column is what the brokers advertise (ApiVersions, read by the recorder)."""
    _, rec = admin
    ranges = next(iter(rec.advertised.values()))
    assert {r.key: r.broker_range for r in _table("api-table")} == {r.key: ranges[r.key] for r in _table("api-table")}
