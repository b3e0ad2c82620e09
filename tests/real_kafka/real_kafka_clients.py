"""Clients and read-backs the DAG, pre-flight and no-loss tests run against the real cluster.

Everything here talks to Kafka through confluent-kafka (librdkafka) or plain kafka-python,
never through the tool's own admin layer, so what a test asserts is read independently of
the code under test. Background samplers run in threads while a run is in progress.
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any, Callable, Iterable

#: Config sources meaning "somebody set this" (not the static file, not Kafka's default).
SET_SOURCES = {"DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_TOPIC_CONFIG"}
#: Key of the numbered records of :class:`SequenceClients`.
SEQ_KEY = b"seq"


def admin(bootstrap: str) -> Any:
    """A confluent-kafka AdminClient (keep it referenced until its futures are done)."""
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def _resources(brokers: Iterable[int], topics: Iterable[str]) -> list[Any]:
    from confluent_kafka.admin import ConfigResource, ResourceType
    return ([ConfigResource(ResourceType.BROKER, str(b)) for b in brokers]
            + [ConfigResource(ResourceType.TOPIC, t) for t in topics])


def _source(entry: Any) -> str:
    from confluent_kafka.admin import ConfigSource
    try:
        return ConfigSource(entry.source).name
    except ValueError:
        return str(entry.source)


def set_configs(client: Any, brokers: Iterable[int], topics: Iterable[str]) -> dict[str, dict[str, str | None]]:
    """Every config somebody set on these brokers and topics: ``broker 1`` / ``topic t`` -> key -> value.

    Every request is sent before any answer is awaited, so a sampler thread can call it often.
    """
    resources = _resources(brokers, topics)
    topic_res = [r for r in resources if r.restype.name == "TOPIC"]
    # librdkafka sends a broker resource to that broker, so it takes one per call (_CONFLICT otherwise).
    batches = [[r] for r in resources if r.restype.name == "BROKER"] + ([topic_res] if topic_res else [])
    futures: dict[Any, Any] = {}
    for batch in batches:
        futures.update(client.describe_configs(batch))
    out: dict[str, dict[str, str | None]] = {}
    for res, fut in futures.items():
        kind = "broker" if res.restype.name == "BROKER" else "topic"
        entries = fut.result(timeout=30)
        out[f"{kind} {res.name}"] = {k: e.value for k, e in entries.items() if _source(e) in SET_SOURCES}
    return out


def alter_set(client: Any, kind: str, name: str, values: dict[str, str | None]) -> None:
    """Incrementally set (value) or delete (None) configs of one broker or topic: an operator's own write."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.DELETE if v is None
                           else AlterConfigOpType.SET) for k, v in values.items()]
    rtype = ResourceType.BROKER if kind == "broker" else ResourceType.TOPIC
    for fut in client.incremental_alter_configs([ConfigResource(rtype, name, incremental_configs=entries)]).values():
        fut.result(timeout=30)
    # The controller accepts the write before the broker applies it from the metadata log, so
    # a describe right after may still show the old value: wait until the resource shows it.
    key = f"{kind} {name}"
    brokers, topics = ([int(name)], []) if kind == "broker" else ([], [name])
    deadline = time.monotonic() + 30
    while True:
        now = set_configs(client, brokers, topics).get(key, {})
        if all(now.get(k) == v for k, v in values.items()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{key}: {values} written but {now} read back after 30 s")
        time.sleep(0.1)


def reassignments(bootstrap: str) -> dict[str, dict[str, list[int]]]:
    """Every partition reassignment in flight: ``topic-p`` -> replicas, adding and removing ones.

    Read with plain kafka-python (ListPartitionReassignments; confluent-kafka has no such call).
    """
    from kafka import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="real-kafka-test-reassignments")
    try:
        return {f"{tp.topic}-{tp.partition}": v for tp, v in client.list_partition_reassignments().items()}
    finally:
        client.close()


def partitions(client: Any, topic: str) -> dict[int, dict[str, Any]]:
    """Partition -> leader, replicas and ISR from a metadata request (confluent-kafka)."""
    md = client.list_topics(topic, timeout=10).topics[topic]
    if md.error is not None:
        raise RuntimeError(f"metadata of {topic}: {md.error}")
    return {p.id: {"leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}
            for p in md.partitions.values()}


def wait_for(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll ``cond`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)


class Sampler:
    """Calls ``sample()`` every ``interval`` seconds in a thread until stopped; keeps every result.

    An exception inside a sample is kept (and sampling goes on): a broker busy with a leader
    change may fail one request, which must not end the watch.
    """

    def __init__(self, sample: Callable[[], Any], interval: float = 0.2, name: str = "sampler") -> None:
        self.sample, self.interval = sample, interval
        self.results: list[tuple[float, Any]] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.results.append((time.monotonic(), self.sample()))
            except Exception as exc:  # noqa: BLE001 - kept for the test to look at
                self.errors.append(exc)
            self._stop.wait(self.interval)

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.thread.join(timeout=30)


class RateProducer:
    """Writes incompressible records to one partition at about ``bytes_per_sec`` (acks=all) in a thread.

    The rate is what the brokers acknowledged over the time the thread ran, measured here,
    independently of the tool's own measurement.
    """

    def __init__(self, bootstrap: str, topic: str, partition: int, bytes_per_sec: float,
                 record_bytes: int = 10_000) -> None:
        from confluent_kafka import Producer
        self.topic, self.partition = topic, partition
        self.record_bytes, self.bytes_per_sec = record_bytes, bytes_per_sec
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "compression.type": "none", "enable.idempotence": True})
        self.acked_bytes, self.failed = 0, []  # type: int, list[str]
        self.started = self.stopped = 0.0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="rate-producer")

    def _done(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.acked_bytes += self.record_bytes
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        payload = os.urandom(self.record_bytes)
        interval = self.record_bytes / self.bytes_per_sec
        self.started = next_at = time.monotonic()
        while not self._stop.is_set():
            self.producer.produce(self.topic, value=payload, partition=self.partition, on_delivery=self._done)
            self.producer.poll(0)
            next_at += interval
            # Paced against a schedule, not a fixed sleep, so a slow poll does not lower the rate.
            self._stop.wait(max(0.0, next_at - time.monotonic()))
        self.producer.flush(30)
        self.stopped = time.monotonic()
        # Closed here, not when collected: a producer left for the collector outlives the session's
        # cluster and logs "Connection refused" from its metadata refreshes after the last test.
        self.producer.close()

    @property
    def rate(self) -> float:
        """Acknowledged bytes per second so far."""
        end = self.stopped or time.monotonic()
        return self.acked_bytes / max(1e-6, end - self.started)

    def __enter__(self) -> "RateProducer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.thread.join(timeout=60)


class SequenceClients:
    """An idempotent acks=all producer and a consumer, in threads, over every partition of a topic.

    The producer writes ``"<partition>:<seq>"`` records keyed ``SEQ_KEY``; what the brokers
    acknowledged and what the consumer read are kept per partition, in the order they happened.
    Records without that key (filler written before) are skipped.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, pause: float = 0.01) -> None:
        from confluent_kafka import Consumer, Producer
        self.topic, self.partitions, self.pause = topic, partitions, pause
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 2, "message.timeout.ms": 120_000,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"no-loss-{uuid.uuid4().hex}",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000})
        self.acked: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self.read: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []
        self._producing, self._consuming = threading.Event(), threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True, name="seq-producer"),
                        threading.Thread(target=self._consume, daemon=True, name="seq-consumer")]

    def _ack(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(f"produce: {err}")
            return
        part, seq = msg.value().decode().split(":")
        self.acked[int(part)].append(int(seq))

    def _produce(self) -> None:
        seq = 0
        while not self._producing.is_set():
            for p in range(self.partitions):
                self.producer.produce(self.topic, key=SEQ_KEY, value=f"{p}:{seq}".encode(), partition=p,
                                      on_delivery=self._ack)
            self.producer.poll(0)
            seq += 1
            time.sleep(self.pause)
        left = self.producer.flush(120)
        if left:
            self.errors.append(f"produce: {left} record(s) never acknowledged")
        self.producer.close()  # as RateProducer does

    def _consume(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        while not self._consuming.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                # Transient errors (leader changes) are reported by librdkafka and retried by it.
                if msg.error().fatal():
                    self.errors.append(f"consume: {msg.error()}")
                continue
            if msg.key() != SEQ_KEY:
                continue
            part, seq = msg.value().decode().split(":")
            if int(part) != msg.partition():
                self.errors.append(f"record of partition {part} read from {msg.partition()}")
            self.read[msg.partition()].append(int(seq))

    def caught_up(self) -> bool:
        return all(len(self.read[p]) >= len(self.acked[p]) for p in self.acked)

    def __enter__(self) -> "SequenceClients":
        for t in self.threads:
            t.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop producing (flush), then read until every acknowledged record arrived or ``timeout``."""
        self._producing.set()
        self.threads[0].join(timeout + 120)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.caught_up():
            time.sleep(0.1)
        self._consuming.set()
        self.threads[1].join(timeout)

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.consumer.close()
