"""Topics and data on a real cluster: what the tests, the benchmarks and the demo move.

Writes go through confluent-kafka (librdkafka), a client independent of the tool's own
kafka-python, with incompressible payloads so a partition's bytes on disk are what was written.
"""
from __future__ import annotations

import os
import time
from typing import Mapping

RECORD_BYTES = 100_000
#: librdkafka's default batch.size: bulk writes make batches of about 0.9 MB
BATCH_BYTES = 1_000_000


def create_topic(bootstrap: str, name: str, assignment: Mapping[int, list[int]],
                 configs: Mapping[str, str] | None = None, timeout: float = 60.0) -> None:
    """Create ``name`` with an explicit replica assignment, and wait until every partition has a leader.

    :param assignment: partition -> replicas (the first is the preferred leader)
    """
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kafka-local-load")
    try:
        admin.create_topics([NewTopic(name, num_partitions=-1, replication_factor=-1,
                                      replica_assignments={p: list(r) for p, r in assignment.items()},
                                      topic_configs=dict(configs or {}))])
    finally:
        admin.close()
    wait_leaders(bootstrap, name, len(assignment), timeout)


def wait_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Wait until each partition of ``topic`` has a leader (new topics take a moment)."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md and not md.error and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic}: not every partition has a leader after {timeout:.0f} s")
        time.sleep(0.2)


def fill(bootstrap: str, topic: str, bytes_per_partition: Mapping[int, int],
         record_bytes: int = RECORD_BYTES, batch_bytes: int = BATCH_BYTES) -> int:
    """Write about ``bytes_per_partition[p]`` bytes to each partition (acks=all); total bytes acked.

    :param record_bytes: bytes of one record's value
    :param batch_bytes: the producer's ``batch.size``: the record batches on disk are at most this
        (or one record, when larger). A follower's fetch of 1 MiB ends in a partial batch that its
        throttle counts but it cannot append, so batch size sets how much of a throttled copy's
        rate is real progress (docs/SIMULATOR.md, calibration f)
    """
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": batch_bytes, "compression.type": "none",
                         "message.max.bytes": 1_000_000})
    payload = os.urandom(record_bytes)
    acked = [0]
    failed: list[str] = []

    def done(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked[0] += record_bytes

    try:
        for partition, size in bytes_per_partition.items():
            for _ in range(max(1, size // record_bytes)):
                while True:
                    try:
                        producer.produce(topic, value=payload, partition=partition, on_delivery=done)
                        break
                    except BufferError:
                        producer.poll(0.1)
                producer.poll(0)
        producer.flush(120)
    finally:
        # Closed now, not whenever it is collected: a producer outliving its cluster keeps
        # reconnecting to it (and logging so) until the process ends.
        producer.close()
    if failed:
        raise RuntimeError(f"filling {topic}: {len(failed)} record(s) failed, first: {failed[0]}")
    return acked[0]
