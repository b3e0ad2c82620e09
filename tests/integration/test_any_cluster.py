"""End to end on whatever cluster ``kafka_bootstrap`` gives: the simulator, or a real Kafka
(``KAFKA_BOOTSTRAP=host:9092``). Uses only what any cluster allows: its own topic, its own
records, a move of that topic's partitions, and checks that nothing is left behind."""
from __future__ import annotations

import time
import uuid

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.planning.plan import PartitionMove, ReassignmentPlan
from kafka_reassign.run.reassign import run_reassignment
from kafka_reassign.throttle.record import MemoryRecordStore
from kafka_reassign.throttle.specs import (FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE,
                                     LEADER_REPLICAS)

RECORDS = 200


def _wait_for_topic(admin: KafkaAdmin, topic: str, partitions: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = admin.cluster_state().topics.get(topic)
        if t is not None and len(t.partitions) == partitions and \
                all(p.leader is not None and p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} did not come up with {partitions} partitions in {timeout}s")


def test_throttled_move_on_any_cluster(kafka_bootstrap: str) -> None:
    topic = f"kafka-reassign-e2e-{uuid.uuid4().hex[:8]}"
    raw = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, client_id="e2e-setup")
    admin = KafkaAdmin(bootstrap_servers=kafka_bootstrap)
    try:
        brokers = sorted(admin.cluster_state().brokers)
        assert len(brokers) >= 3, "the end-to-end test needs a cluster of at least 3 brokers"
        a, b, c = brokers[:3]
        raw.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1,
                                    replica_assignments={0: [a, b], 1: [b, a]})])
        _wait_for_topic(admin, topic, 2)

        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=5)
        for i in range(RECORDS):
            producer.send(topic, key=str(i % 2).encode(), value=f"record-{i}".encode(), partition=i % 2)
        producer.flush(timeout=30)
        producer.close()

        before = admin.describe_configs([a, b, c], [topic],
                                        keys=[LEADER_RATE, FOLLOWER_RATE, LEADER_REPLICAS, FOLLOWER_REPLICAS])
        plan = ReassignmentPlan([PartitionMove(topic, 0, (c, b)), PartitionMove(topic, 1, (b, c))])
        store = MemoryRecordStore()
        result = run_reassignment(admin, plan, {"throttle_bytes_per_sec": 10_000_000,
                                                "max_partition_movements": 1,
                                                "poll_interval_seconds": 0.2,
                                                "batch_timeout_minutes": 5}, store)
        assert result.error is None, result.error
        assert result.progress.outcome == "done" and result.steps_done >= 2  # one partition at a time

        state = admin.cluster_state()
        assert state.partition(topic, 0).replicas == (c, b)
        assert state.partition(topic, 1).replicas == (b, c)
        assert set(state.partition(topic, 0).isr) == {b, c}
        assert not [k for k in admin.list_partition_reassignments() if k[0] == topic]
        after = admin.describe_configs([a, b, c], [topic],
                                       keys=[LEADER_RATE, FOLLOWER_RATE, LEADER_REPLICAS, FOLLOWER_REPLICAS])
        assert after == before, "throttle configs must be back to exactly what they were"
        assert all(r.restored for r in store.list_all())

        consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=5000)
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        values = {m.value.decode() for m in consumer}
        consumer.close()
        assert values == {f"record-{i}" for i in range(RECORDS)}
    finally:
        try:
            raw.delete_topics([topic])
        except Exception:  # the topic may not exist if creation failed; nothing else to undo
            pass
        raw.close()
        admin.close()
