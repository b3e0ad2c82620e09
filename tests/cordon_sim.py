"""Cordon tests on the simulated cluster (tests/unit, tests/dags): a Kafka 4.3 broker's
``cordoned.log.dirs`` (KIP-1066) with its config sources, read and written by a real KafkaAdmin."""
from __future__ import annotations

from typing import Any, Callable

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.cluster.cordons import CORDONED_LOG_DIRS
from kafka_sim.generate import GenerateOptions, generate_snapshot

D1, D2 = "/var/lib/kafka/data-0", "/var/lib/kafka/data-1"
ALTER_CONFIGS_KEYS = (33, 44)  # AlterConfigs, IncrementalAlterConfigs
SET = 0


def cordon_snapshot(brokers: int = 9, static: dict[int, str] | None = None, sole_isr_on: int | None = None) -> dict:
    """Brokers with two log dirs each.

    :param static: broker -> its static ``cordoned.log.dirs`` (server.properties)
    :param sole_isr_on: give the first partition one replica, on this broker
    """
    snap = generate_snapshot(GenerateOptions(brokers=brokers, racks=3, topics=3, partitions=4, seed=1, log_dirs=2))
    for b in snap["brokers"]:
        if b["id"] in (static or {}):
            b["configs"] = {CORDONED_LOG_DIRS: (static or {})[b["id"]]}
    if sole_isr_on is not None:
        snap["topics"][0]["partitions"][0].update(replicas=[sole_isr_on], leader=sole_isr_on, isr=[sole_isr_on],
                                                  log_dirs=[D1])
    return snap


class CordonCluster:
    """A started simulated cluster, the KafkaAdmin on it, and what was written to its brokers.

    :param sim_cluster: the ``sim_cluster`` fixture
    :param own: broker -> its own (dynamic, per-broker) value, set before the test starts counting
    :param cordons: False plays a Kafka 4.1 cluster (DescribeLogDirs v4)
    """

    def __init__(self, sim_cluster: Callable[..., Any], snapshot: dict, own: dict[int, str] | None = None,
                 cordons: bool = True) -> None:
        self.cluster = sim_cluster(snapshot, time_scale=50.0, cordons=cordons)
        for broker, value in (own or {}).items():
            code, msg = self.cluster.model.incremental_alter_configs(4, str(broker), [(CORDONED_LOG_DIRS, SET, value)])
            assert code == 0, msg
        self._base = self._counts()
        self.admin = KafkaAdmin(bootstrap_servers=self.cluster.bootstrap_servers)

    def _counts(self) -> tuple[int, int]:
        writes = self.cluster.writes
        done = writes["AlterConfigs"] + writes["IncrementalAlterConfigs"]
        asked = sum(n for (key, _client), n in self.cluster.request_counts.items() if key in ALTER_CONFIGS_KEYS)
        return done, asked

    @property
    def writes(self) -> int:
        """Config writes the brokers applied since the start."""
        return self._counts()[0] - self._base[0]

    @property
    def validated(self) -> int:
        """Config requests sent with validate_only since the start (asked, not applied)."""
        done, asked = self._counts()
        return asked - self._base[1] - (done - self._base[0])

    def own(self, *brokers: int) -> dict[int, str | None]:
        """Each broker's own (per-broker dynamic) ``cordoned.log.dirs``; None when not set."""
        return {b: self.cluster.model.broker_configs(b).get(CORDONED_LOG_DIRS) for b in brokers}

    def close(self) -> None:
        self.admin.close()
