"""Record batch sizes on disk: how much a catching-up follower's throttled fetch appends at a time.

A follower fetching under a replication throttle records ``replica.fetch.max.bytes`` (1 MiB)
per partition in the quotas but appends only whole batches, the trailing partial one being
fetched again. On Kafka 4.3.1 a log written in 0.9 MB batches moved at 0.86 of the throttle,
one of 16 kB batches at the throttle, so the rehearsal needs each partition's batch size
(the simulator reads the snapshot's ``batch_bytes``). The admin API does not report it: a
consumer fetching with ``max.partition.fetch.bytes`` = 1 gets exactly one batch per fetch (a
broker always returns the first batch whole, KIP-74): a batch's size on disk is its records'
keys, values and headers plus the v2 framing (61 bytes a batch, about 10 a record), and the
median of a log's first few batches (the very first is often short: a producer starting up)
is its batch size. Sizes are summed, not derived from the log's bytes per record: a log
written by producers of different record sizes would mislead that average.
"""
from __future__ import annotations

import logging
import statistics
import time
from typing import Any, Iterable, Mapping, Protocol, runtime_checkable

from kafka_reassign.cluster.state import TopicPartition
from kafka_reassign.cluster.tiered import is_tiered

log = logging.getLogger(__name__)

#: Snapshot partition field: average record batch size on disk, bytes.
BATCH_BYTES = "batch_bytes"
#: The largest partitions of a topic whose batches are read; the others get their median.
SAMPLED_PER_TOPIC = 3
#: Batches read from the start of each sampled log.
BATCHES_READ = 5
#: Record batch v2 framing: the batch header, and a record's attributes, deltas and length varints.
BATCH_HEADER_BYTES, RECORD_OVERHEAD_BYTES = 61, 10
#: Give up on partitions not answered within this long (they keep the simulator's default).
FETCH_TIMEOUT_S = 5.0


@runtime_checkable
class BatchReader(Protocol):
    """A live cluster's reads that size record batches."""

    def batch_sizes(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, float]:
        """Median bytes of each log's first batches; a partition not answered is left out."""
        ...

    def list_offsets(self, partitions: Iterable[TopicPartition], latest: bool = True) -> dict[TopicPartition, int]:
        """Log-end (or log-start) offsets; a partition whose leader errs is left out."""
        ...


def batch_sizes(connect: Mapping[str, object], partitions: Iterable[TopicPartition],
                timeout: float = FETCH_TIMEOUT_S) -> dict[TopicPartition, float]:
    """Read each log's first BATCHES_READ batches with a kafka-python consumer (no group, nothing committed).

    :param connect: the admin client's kwargs (only those a consumer takes are used)
    :param partitions: (topic, partition) pairs, non-empty logs
    :param timeout: seconds to wait for the batches
    :returns: the median size of the batches read, per partition
    """
    from kafka.consumer import KafkaConsumer
    from kafka.structs import TopicPartition as KTP
    keys = [KTP(t, p) for t, p in partitions]
    if not keys:
        return {}
    conf = {k: v for k, v in connect.items() if k in KafkaConsumer.DEFAULT_CONFIG}
    consumer = KafkaConsumer(**{**conf, "group_id": None, "enable_auto_commit": False,
                                "max_partition_fetch_bytes": 1, "max_poll_records": 1_000_000})
    counts: dict[KTP, list[int]] = {}  # bytes of each batch read
    try:
        consumer.assign(keys)
        consumer.seek_to_beginning(*keys)
        deadline, done = time.monotonic() + timeout, set[KTP]()
        while len(done) < len(keys) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                counts.setdefault(tp, []).append(BATCH_HEADER_BYTES + sum(  # one fetch of 1 byte: one batch
                    max(0, r.serialized_key_size) + max(0, r.serialized_value_size) + RECORD_OVERHEAD_BYTES
                    + sum(len(k) + len(v or b"") for k, v in r.headers) for r in records))
                if len(counts[tp]) >= BATCHES_READ or consumer.position(tp) >= (consumer.highwater(tp) or 0):
                    consumer.pause(tp)
                    done.add(tp)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): float(statistics.median(n)) for tp, n in counts.items() if n}


def sampled(snap: Mapping[str, Any]) -> list[TopicPartition]:
    """The largest non-empty partitions of each non-tiered, non-internal topic of a snapshot."""
    out: list[TopicPartition] = []
    for t in snap["topics"]:
        if t.get("internal") or is_tiered(t.get("configs") or {}):
            continue  # a tiered log's start offset is in remote storage: no local bytes per record
        parts = sorted((p for p in t["partitions"] if int(p.get("size_bytes") or 0) > 0),
                       key=lambda p: -int(p["size_bytes"]))
        out += [(t["name"], int(p["partition"])) for p in parts[:SAMPLED_PER_TOPIC]]
    return out


def add_batch_bytes(reader: BatchReader, snap: dict[str, Any]) -> int:
    """Set ``batch_bytes`` on the snapshot's partitions from their first batches; how many topics got it.

    Sampled partitions get their own figure, the topic's other partitions the median of its
    sampled ones (one topic's producers batch alike). A failed read leaves the snapshot as it was.
    """
    keys = sampled(snap)
    try:
        start = reader.list_offsets(keys, latest=False)
        end = reader.list_offsets(keys, latest=True)
        # Only logs holding records: a fetch from one without (a simulator seeded with sizes only)
        # would wait out the timeout for nothing.
        measured = reader.batch_sizes([k for k in keys if end.get(k, 0) > start.get(k, 0)])
    except Exception as exc:  # noqa: BLE001 - an optional measure: the simulator's default stays
        log.warning("record batch sizes not measured (the rehearsal assumes 16 kB batches): %s", exc)
        return 0
    done = 0
    for t in snap["topics"]:
        own = {p: round(v) for (name, p), v in measured.items() if name == t["name"] and v > 0}
        if not own:
            continue
        median = round(statistics.median(own.values()))
        for p in t["partitions"]:
            if int(p.get("size_bytes") or 0) > 0:
                p[BATCH_BYTES] = own.get(int(p["partition"]), median)
        done += 1
    return done
