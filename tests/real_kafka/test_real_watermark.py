"""The high watermark under min ISR on real Kafka, for the simulator's model of it.

Kafka's leader does not move its high watermark while the ISR is smaller than
``min.insync.replicas`` (``Partition.maybeIncrementLeaderHW``), whatever took the ISR there. The
simulator's twin is ``unit/test_sim_quotas_isr.py::test_a_stopped_follower_taking_the_isr_under_min_isr_stops_the_watermark_until_it_is_back``:
the same steps, the same expectations.
"""
from __future__ import annotations

from real_kafka_clients import admin, partitions, wait_for


def _produce(bootstrap: str, topic: str, n: int) -> None:
    """``n`` records with acks=1 (accepted under min ISR, unlike acks=all)."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    failed: list[object] = []
    try:
        for _ in range(n):
            producer.produce(topic, value=b"x" * 1000, partition=0,
                             on_delivery=lambda err, msg: failed.append(err) if err is not None else None)
        assert producer.flush(30) == 0 and not failed, failed
    finally:
        producer.close()


def _high_watermark(bootstrap: str, topic: str) -> int:
    """ListOffsets LATEST (read_uncommitted): the high watermark, what a consumer may read up to."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "real-watermark-probe"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def test_a_stopped_follower_taking_the_isr_under_min_isr_stops_the_watermark_until_it_is_back(
        real_bootstrap, local_kafka, topic_name):
    from kafka_local.load import create_topic
    bs = real_bootstrap
    topic = topic_name("hw")
    create_topic(bs, topic, {0: [1, 2, 3]}, {"min.insync.replicas": "2"})
    client = admin(bs)

    def isr() -> list[int]:
        return sorted(partitions(client, topic)[0]["isr"])

    # (a broker left stopped by a failure here is started again by conftest's nothing_left_behind)
    local_kafka.stop_broker(3)
    wait_for(lambda: isr() == [1, 2], 60, "broker 3 out of the ISR")
    _produce(bs, topic, 20)
    wait_for(lambda: _high_watermark(bs, topic) == 20, 30, "the watermark at the log end (ISR at min ISR)")
    local_kafka.stop_broker(2)
    wait_for(lambda: isr() == [1], 60, "broker 2 out of the ISR")
    _produce(bs, topic, 10)  # the leader's log end is 30 now
    assert _high_watermark(bs, topic) == 20, "under min ISR the watermark stays where it was"
    local_kafka.start_broker(2)
    wait_for(lambda: isr() == [1, 2], 60, "broker 2 back in the ISR")
    wait_for(lambda: _high_watermark(bs, topic) == 30, 30, "the watermark at the log end again")
    local_kafka.start_broker(3)
