"""The snapshot's record batch sizes, read over the wire from the simulator holding produced batches."""
from __future__ import annotations

import logging

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.cluster.batches import BATCH_BYTES
from kafka_reassign.cluster.consumers import CONSUMER_BYTES
from kafka_reassign.cluster.snapshot import read_cluster_snapshot
from sim_snapshots import make_snapshot

RECORD = 10_000
BATCH = 200_000  # the producer's batch.size: 19 records of 10 kB fit


def test_sampled_snapshot_carries_the_batch_size_the_producer_wrote(caplog):
    from kafka import KafkaProducer
    from kafka_sim import SimulatedCluster
    snap = make_snapshot(4, 2, {"batched": {"partitions": 1, "rf": 3, "size_bytes": 0},
                                "seeded": {"partitions": 1, "rf": 3, "size_bytes": 5_000_000}})
    with SimulatedCluster(snap, time_scale=1.0) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1, linger_ms=1000,
                                 batch_size=BATCH, compression_type=None)
        for _ in range(95):  # five full batches
            producer.send("batched", b"x" * RECORD, partition=0)
        producer.flush(30)
        producer.close()
        admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)
        try:
            unsampled = read_cluster_snapshot(admin)
            with caplog.at_level(logging.WARNING, logger="kafka_reassign.cluster.consumers"):
                taken = read_cluster_snapshot(admin, sample_seconds=0.2)
        finally:
            admin.close()
    parts = {t["name"]: t["partitions"][0] for t in taken["topics"]}
    # 19 records of 10 kB plus their headers: the batch on disk, not the records' payload
    assert 19 * RECORD < parts["batched"][BATCH_BYTES] < 19 * RECORD * 1.02, parts
    # a partition seeded with a size and no records keeps the simulator's default (no value measured)
    assert BATCH_BYTES not in parts["seeded"]
    assert all(BATCH_BYTES not in p for t in unsampled["topics"] for p in t["partitions"])
    # the simulator answers no ListGroups: consumer bytes are left out (the planner's consumer_fanout
    # stands in), said once, and the snapshot is still taken
    assert all(CONSUMER_BYTES not in p for t in taken["topics"] for p in t["partitions"])
    assert [r.getMessage() for r in caplog.records if "consumer bytes not measured" in r.getMessage()] == [
        "consumer bytes not measured (the planner uses consumer_fanout): ListGroups failed: UNSUPPORTED_VERSION "
        "(the brokers do not answer ListGroups)"]
