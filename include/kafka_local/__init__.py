"""A real Apache Kafka KRaft cluster on 127.0.0.1, started from Kafka's own jars.

The jars (Apache Kafka 4.3.1, broker, controller and tools) come from Maven Central through
``kafka/pom.xml`` (``make setup``). One controller and N brokers run as separate JVMs, each
with a small heap, ``broker.rack`` set and K ``log.dirs``. Used by the tests, the benchmarks
and ``make demo-kafka``; ``kafka-local`` is its command line.
"""
from __future__ import annotations

from kafka_local.cluster import LocalKafka, LocalKafkaError, NodeSpec

__all__ = ["LocalKafka", "LocalKafkaError", "NodeSpec"]
