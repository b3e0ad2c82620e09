"""The local real Apache Kafka cluster for this group: one per test session.

6 brokers over 3 racks, 2 log dirs each, Apache Kafka 4.3.1 started by :mod:`kafka_local`
from Kafka's own jars (``make setup``). Missing Java or jars fail every test here with the
reason, never a skip. ``KAFKA_LOCAL_DIR`` (a cluster started by ``kafka-local up --brokers 6
--racks 3 --log-dirs 2``) reuses a running cluster while developing. After each test, every broker must be running again and no throttle
config may be left on any broker or on the test's topics.
"""
from __future__ import annotations

import gc
import itertools
import os
from typing import Callable, Iterator

import pytest

from real_kafka_checks import throttle_configs

BROKERS, RACKS, LOG_DIRS = 6, 3, 2
_names = itertools.count(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/real_kafka/" in str(item.fspath):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def local_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator["LocalKafka"]:  # noqa: F821
    """The running cluster (a :class:`kafka_local.LocalKafka`); killed with the session, or by its watchdog."""
    from kafka_local import LocalKafka
    if os.environ.get("KAFKA_LOCAL_DIR"):
        # While developing: a cluster already started with `kafka-local up` (same shape), kept running.
        yield LocalKafka.load(os.environ["KAFKA_LOCAL_DIR"])
        return
    cluster = LocalKafka(tmp_path_factory.mktemp("kafka-local"), BROKERS, RACKS, LOG_DIRS, owner_pid=os.getpid())
    cluster.up()
    try:
        yield cluster
    finally:
        # Clients left in garbage cycles (librdkafka names an AdminClient "rdkafka#producer-N")
        # are closed now, while their brokers still answer; found at exit instead, they
        # retried the stopped brokers and printed "Connection refused" after the session.
        gc.collect()
        cluster.down()


@pytest.fixture
def real_bootstrap(local_kafka) -> str:
    """Bootstrap servers of the local real cluster."""
    return local_kafka.bootstrap_servers


_TOPICS = pytest.StashKey[list]()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Factory: a topic name no other test of the session uses, remembered for the leftover check."""
    made: list[str] = request.node.stash.setdefault(_TOPICS, [])

    def make(prefix: str = "t") -> str:
        name = f"{prefix}-{os.getpid()}-{next(_names)}"  # unique on a reused KAFKA_LOCAL_DIR cluster too
        made.append(name)
        return name

    return make


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test: every broker runs again, and no throttle config is left anywhere."""
    yield
    if "local_kafka" not in request.fixturenames:
        return
    cluster = request.getfixturevalue("local_kafka")
    for row in cluster.status():
        if row["role"] == "broker" and not row["running"]:
            cluster.start_broker(row["node"])  # the next test needs the whole cluster
    made = request.node.stash.get(_TOPICS, [])
    left = throttle_configs(cluster.bootstrap_servers, cluster.brokers, made)
    assert not left, f"throttle configs left behind on the real cluster: {left}"
