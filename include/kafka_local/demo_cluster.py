"""The demo's scenario on a real local Kafka cluster (``make demo-kafka``).

The same brokers, racks, topics and replica placement as the simulated demo, with each
partition filled with real records at a fraction of the scenario's size (a laptop writes
them in seconds). It answers the four questions the demo asks of a cluster: where to
connect, a snapshot, and each broker's and topic's dynamic configs, read back with the
config source through confluent-kafka (a client independent of the tool's own).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafka_local.cluster import LocalKafka
from kafka_local.load import create_topic, fill

#: Sources of a config somebody set (not the static file, not Kafka's default).
SET_SOURCES = ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_TOPIC_CONFIG")


class RealDemoCluster:
    """A :class:`LocalKafka` holding a scenario's topics with real data.

    :param scenario: a snapshot (the demo's bundled one)
    :param directory: the cluster's folder
    :param size_scale: each partition gets ``size_bytes * size_scale`` bytes of records
    """

    def __init__(self, scenario: dict[str, Any], directory: Path, size_scale: float = 0.05) -> None:
        brokers = scenario["brokers"]
        racks = len({b.get("rack") for b in brokers})
        log_dirs = max(len(b.get("log_dirs") or [1]) for b in brokers)
        if [b["id"] for b in brokers] != list(range(1, len(brokers) + 1)):
            raise ValueError("the scenario's broker ids must be 1..N for a local cluster")
        self.scenario, self.size_scale = scenario, size_scale
        self.local = LocalKafka(directory, len(brokers), racks, log_dirs, owner_pid=os.getpid())
        self._admin: Any = None  # one confluent-kafka admin for every read (the narration reads each second)

    @property
    def bootstrap_servers(self) -> str:
        return self.local.bootstrap_servers

    def start(self) -> None:
        """Start the cluster, create every topic where the scenario places it, and fill it."""
        self.local.up()
        try:
            for topic in self.scenario["topics"]:
                placement = {p["partition"]: list(p["replicas"]) for p in topic["partitions"]}
                create_topic(self.bootstrap_servers, topic["name"], placement, topic.get("configs"))
                fill(self.bootstrap_servers, topic["name"],
                     {p["partition"]: int(p.get("size_bytes", 0) * self.size_scale) for p in topic["partitions"]})
        except BaseException:
            self.local.down()
            raise

    def stop(self) -> None:
        # Dropped first: a client kept past the cluster's end retries its brokers until the
        # process exits, printing a connection refused line every second.
        self._admin = None
        self.local.down()

    def snapshot(self) -> dict[str, Any]:
        """The cluster as ``kafka-reassign snapshot`` reads it."""
        from kafka_reassign.cluster.admin import KafkaAdmin
        from kafka_reassign.cluster.snapshot import read_cluster_snapshot
        with KafkaAdmin(bootstrap_servers=self.bootstrap_servers) as admin:
            return read_cluster_snapshot(admin)

    def _dynamic(self, kind: str, name: str) -> dict[str, str]:
        from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 3})
        res = ConfigResource(ResourceType.BROKER if kind == "broker" else ResourceType.TOPIC, name)
        entries = self._admin.describe_configs([res])[res].result(timeout=30)
        return {k: f"{e.value} ({_source(e)})" for k, e in entries.items() if _source(e) in SET_SOURCES}

    def broker_configs(self, broker_id: int) -> dict[str, str]:
        """Dynamic configs of one broker, each with its source (per-broker or cluster default)."""
        return self._dynamic("broker", str(broker_id))

    def topic_configs(self, topic: str) -> dict[str, str]:
        """Dynamic configs of one topic."""
        return self._dynamic("topic", topic)


def _source(entry: Any) -> str:
    from confluent_kafka.admin import ConfigSource
    try:
        return ConfigSource(entry.source).name
    except ValueError:
        return str(entry.source)
