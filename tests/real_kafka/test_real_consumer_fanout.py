"""Consumer fan-out measured on the real cluster (issue 23): two consumer groups read one topic,
none reads the other, and the sampled snapshot's ``consumer_bytes_per_sec`` (the groups'
committed offsets at both ends of the interval, times the log's bytes per offset) shows about
twice the produce rate on the first topic and 0 on the second.

Producers and consumers are confluent-kafka (librdkafka) clients, independent of the tool's own
kafka-python client: the consumers commit offsets every 200 ms, as any auto-committing
application does.
"""
from __future__ import annotations

import threading
import uuid
from contextlib import ExitStack
from typing import Any

from kafka_local.load import create_topic
from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.cluster.consumers import CONSUMER_BYTES
from kafka_reassign.cluster.snapshot import read_cluster_snapshot
from real_kafka_clients import RateProducer, wait_for

PRODUCE = 300_000  # bytes/s per topic
GROUPS = 2


class GroupConsumer:
    """One consumer of its own group on ``topic``, polling in a thread, auto-committing every 200 ms."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        self.consumer.subscribe([topic])
        self.read = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"consumer-{group}")

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                self.read += 1
        self.consumer.close()  # commits what it read and leaves the group

    def __enter__(self) -> "GroupConsumer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.thread.join(timeout=30)


def test_two_groups_read_twice_the_produce_rate_and_an_unread_topic_nothing(real_bootstrap, topic_name) -> None:
    read, unread = topic_name(f"fan-read-{uuid.uuid4().hex[:6]}"), topic_name(f"fan-unread-{uuid.uuid4().hex[:6]}")
    create_topic(real_bootstrap, read, {0: [1, 2, 3]})
    create_topic(real_bootstrap, unread, {0: [4, 5, 6]})
    suffix = uuid.uuid4().hex[:6]
    with ExitStack() as running:
        p_read = running.enter_context(RateProducer(real_bootstrap, read, 0, PRODUCE))
        running.enter_context(RateProducer(real_bootstrap, unread, 0, PRODUCE))
        consumers = [running.enter_context(GroupConsumer(real_bootstrap, read, f"fan-{suffix}-{g}"))
                     for g in range(GROUPS)]
        # both groups joined and reading (committing) before the interval starts
        wait_for(lambda: all(c.read >= 20 for c in consumers), 30, "both consumer groups reading")
        with KafkaAdmin(bootstrap_servers=real_bootstrap) as admin:
            snap = read_cluster_snapshot(admin, sample_seconds=4)
    assert not p_read.failed, p_read.failed[:3]
    parts = {t["name"]: t["partitions"][0] for t in snap["topics"] if t["name"] in (read, unread)}
    consumed, produced = parts[read][CONSUMER_BYTES], parts[read]["bytes_in_per_sec"]
    # each group reads what is produced (it keeps up): two groups, twice the produce rate, against the
    # producer's own acknowledged rate and against the snapshot's measured one
    assert 0.6 * GROUPS * p_read.rate < consumed < 1.6 * GROUPS * p_read.rate, (consumed, p_read.rate)
    assert 0.6 * GROUPS < consumed / produced < 1.6 * GROUPS, (consumed, produced)
    assert parts[unread][CONSUMER_BYTES] == 0.0 and parts[unread]["bytes_in_per_sec"] > 0
