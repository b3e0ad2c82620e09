"""No loss: the kafka_reassign DAG moves partitions while real clients produce and consume.

A kafka-python producer (acks=all, idempotent, retrying) writes a numbered sequence into each
partition and a consumer reads along, both over TCP against the simulator, while the DAG
carries out a plan of several batches that moves replicas and preferred leaders. Every
acknowledged record must be read back exactly once and in order, and no moving partition's
ISR may fall below min.insync.replicas at any sample.
"""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from test_dag_reassign import airflow_db, kafka_conn, plan_of  # noqa: E402,F401
from sim_snapshots import make_snapshot  # noqa: E402

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

TOPIC, PARTITIONS, MIN_ISR = "orders", 4, 2
# Every move replaces the preferred leader and needs its own batch (max_partition_movements 1).
PLAN = plan_of((TOPIC, 0, [4, 5, 2]), (TOPIC, 1, [5, 6, 3]), (TOPIC, 2, [1, 4, 6]), (TOPIC, 3, [2, 1, 5]))


class Clients:
    """A producer and a consumer running in threads; what was acknowledged and what was read."""

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                      linger_ms=2, retries=2**31 - 1, request_timeout_ms=10_000,
                                      metadata_max_age_ms=1000)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                      auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                      metadata_max_age_ms=1000)
        self.consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.read: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()
        self.producing, self.consuming = threading.Event(), threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]

    def _produce(self) -> None:
        seq = 0
        while not self.producing.is_set():
            for p in range(PARTITIONS):
                fut = self.producer.send(TOPIC, value=f"{p}:{seq}".encode(), partition=p)
                fut.add_callback(lambda _md, p=p, s=seq: self._ack(p, s))
                fut.add_errback(self.errors.append)
            seq += 1
            time.sleep(0.005)
        self.producer.flush(60)

    def _ack(self, p: int, seq: int) -> None:
        with self.lock:
            self.acked[p].append(seq)

    def _consume(self) -> None:
        while not self.consuming.is_set():
            for records in self.consumer.poll(timeout_ms=200).values():
                for r in records:
                    part, seq = r.value.decode().split(":")
                    assert int(part) == r.partition
                    self.read[r.partition].append(int(seq))

    def __enter__(self) -> "Clients":
        for t in self.threads:
            t.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop producing, then read until every acknowledged record has arrived (or time out)."""
        self.producing.set()
        self.threads[0].join(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(len(self.read[p]) < len(self.acked[p]) for p in self.acked):
            time.sleep(0.1)
        self.consuming.set()
        self.threads[1].join(timeout)

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.producer.close(10)
        self.consumer.close()


class IsrWatch(threading.Thread):
    """Samples the ISR of every partition of the topic until stopped; keeps the smallest seen."""

    def __init__(self, cluster: Any) -> None:
        super().__init__(daemon=True)
        self.cluster, self.samples = cluster, 0
        self.smallest: dict[int, list[int]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for p in range(PARTITIONS):
                isr = self.cluster.partition_state(TOPIC, p)["isr"]
                if p not in self.smallest or len(isr) < len(self.smallest[p]):
                    self.smallest[p] = list(isr)
            self.samples += 1
            time.sleep(0.01)


def test_no_acknowledged_record_is_lost_or_duplicated_during_a_dag_run(airflow_db, sim_cluster, kafka_conn):
    snap = make_snapshot(brokers=6, racks=3, topics={
        TOPIC: {"partitions": PARTITIONS, "rf": 3, "size_bytes": 8_000_000,
                "configs": {"min.insync.replicas": str(MIN_ISR)}}})
    cluster = sim_cluster(snap, time_scale=2.0)
    kafka_conn(cluster)
    watch = IsrWatch(cluster)
    watch.start()
    with Clients(cluster.bootstrap_servers) as clients:
        time.sleep(1.0)  # records before the run too
        dr = airflow_env.run_dag({"plan": PLAN, "throttle_bytes_per_sec": 20_000_000, "max_partition_movements": 1,
                                  "poll_interval_seconds": 0.2, "batch_timeout_minutes": 2,
                                  "stall_window_minutes": 1})
        time.sleep(1.0)  # and after it
    watch.done.set()
    watch.join(10)
    assert dr.state == "success", airflow_env.task_states(dr)
    for e in PLAN["partitions"]:
        assert cluster.partition_state(TOPIC, e["partition"])["replicas"] == e["replicas"]
    assert not clients.errors, clients.errors[:3]
    for p in range(PARTITIONS):
        acked, read = clients.acked[p], clients.read[p]
        assert len(acked) > 50, f"partition {p}: only {len(acked)} records acknowledged"
        assert acked == sorted(acked), f"partition {p}: acknowledgements out of order"
        # Exactly once, in order: what was read is the acknowledged sequence, no gap, no repeat.
        assert read[:len(acked)] == acked, f"partition {p}: read back differs from what was acknowledged"
        assert len(read) == len(set(read)), f"partition {p}: duplicates read"
    assert watch.samples > 100
    assert all(len(isr) >= MIN_ISR for isr in watch.smallest.values()), watch.smallest
