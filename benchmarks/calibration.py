"""Calibration: the same throttled move on the simulator and on a real Apache Kafka cluster.

Each scenario creates a topic, optionally starts an in-sync producer (confluent-kafka,
acks=all, rate-limited), sets the KIP-73 throttle (rates on the brokers involved, throttled
replica lists on the topic, as kafka-reassign-partitions does), starts the reassignment with
kafka-python's admin client and polls ListPartitionReassignments every 0.2 s until it is
empty. Both sides run through this same code; only the cluster differs (the real cluster is
filled with bytes, the simulator starts with the same sizes in its snapshot). The time is
taken on the cluster's side of the client: from AlterPartitionReassignments accepted to the
first empty listing.

Prints ``scenario | real Kafka s | simulator s | difference %`` and writes the same table
into docs/SIMULATOR.md between ``<!-- calibration:begin -->`` and ``<!-- calibration:end -->``.

Run: ``.venv/bin/python -m benchmarks.calibration [--only NAME ...] [--no-docs | --docs-rows]``
(``KAFKA_LOCAL_DIR`` reuses a running ``kafka-local`` cluster of 6 brokers, 3 racks, 2 dirs).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

if TYPE_CHECKING:
    from benchmarks.calibration_timed import Timed
    from kafka_local import LocalKafka

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "SIMULATOR.md"
BEGIN, END = "<!-- calibration:begin -->", "<!-- calibration:end -->"
BROKERS, RACKS, LOG_DIRS = 6, 3, 2
MB = 1_000_000
POLL_S = 0.2
#: the producer runs this long before the move, so the leader's quota window (11 x 1 s)
#: holds steady in-sync traffic on both sides when the move starts
WARMUP_S = 12.0
RECORD_BYTES = 10_000
CONFIG_SETTLE_S = 2.0
#: record batch size on disk of what kafka_local.load.fill writes (librdkafka, batch.size
#: 1 MB, 10 kB records): a new replica's log grew in steps of 0.90 MB on Kafka 4.3.1. The
#: simulator needs it: each 1 MiB fetch (replica.fetch.max.bytes) appends one such batch
#: but counts 1 MiB in the quotas (kafka_sim.replication_flows._fetch_overhead).
FILL_BATCH_BYTES = 900_000


@dataclass(frozen=True)
class Scenario:
    """One calibration case: partitions moved together under one throttle rate."""

    name: str
    moves: Mapping[int, tuple[tuple[int, ...], tuple[int, ...]]]  # partition -> (replicas, target)
    bytes_per_partition: int
    rate: int  # leader and follower throttled rate, bytes/s
    produce: float = 0.0  # in-sync producer into partition 0, bytes/s
    timeout: float = 60.0  # a move still running then counts as stalled (and is cancelled)
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    #: a timed scenario's own run (benchmarks.calibration_timed.Timed), None for a plain move
    timed: Timed | None = None
    #: what the table says when nothing happened within the timeout
    unfinished: str = "stalled"

    @property
    def brokers(self) -> list[int]:
        """Every broker holding a replica before or after the move (these get the rates)."""
        return sorted({b for src, dst in self.moves.values() for b in (*src, *dst)})


def _one(rate: int, produce: float, timeout: float, label: str) -> Scenario:
    """Scenario (a): partition 0 of 20 MB, [1,2,3] -> [4,2,3]."""
    return Scenario(label, {0: ((1, 2, 3), (4, 2, 3))}, 20 * MB, rate, produce, timeout)


def scenarios() -> list[Scenario]:
    """(a) 20 MB, [1,2,3] -> [4,2,3] at 2 MB/s, no producer and producers around R/3; (b) 12 partitions;
    (c, d, e) the timed scenarios of benchmarks.calibration_timed; (f, g) two copies bound by one
    receiver's follower quota, then by one leader's quota."""
    from benchmarks.calibration_timed import timed_scenarios
    r = 2 * MB
    spread = {p: (tuple(1 + (p + i) % 3 for i in range(3)),
                  tuple([4 + p % 3] + [1 + (p + i) % 3 for i in (1, 2)])) for p in range(12)}
    return [
        _one(r, 0.0, 60.0, "a: 20 MB, 2 MB/s, no producer"),
        _one(r, r / 6, 60.0, "a: 20 MB, 2 MB/s, producer R/6"),
        _one(r, r / 3, 40.0, "a: 20 MB, 2 MB/s, producer R/3"),
        _one(r, r * 0.4, 40.0, "a: 20 MB, 2 MB/s, producer 0.4 R"),
        Scenario("b: 12 x 10 MB, 2 MB/s", spread, 10 * MB, r, 0.0, 90.0),
        *timed_scenarios(),
        # which quota binds: broker 6 fetches two copies (one from each of two leaders) / leader 1 sends two
        Scenario("f: 2 x 20 MB into broker 6 from leaders 1 and 2, 2 MB/s (follower quota binds)",
                 {0: ((1, 2, 3), (1, 2, 6)), 1: ((2, 4, 5), (2, 4, 6))}, 20 * MB, r, 0.0, 90.0),
        Scenario("g: 2 x 20 MB out of leader 1 to brokers 5 and 6, 2 MB/s (leader quota binds)",
                 {0: ((1, 2, 3), (1, 2, 5)), 1: ((1, 3, 4), (1, 3, 6))}, 20 * MB, r, 0.0, 90.0),
    ]


# ------------------------------------------------------------------ admin calls (both sides)
def _admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="calibration", request_timeout_ms=30000)


def throttle_changes(sc: Scenario, topic: str, on: bool) -> list:
    """ConfigResources that set (``on``) or delete the scenario's throttle configs."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
    leader = ",".join(f"{p}:{b}" for p, (src, _dst) in sorted(sc.moves.items()) for b in src)
    follower = ",".join(f"{p}:{b}" for p, (src, dst) in sorted(sc.moves.items()) for b in dst if b not in src)

    def op(value: object) -> tuple:
        return (AlterConfigOp.SET, str(value)) if on else (AlterConfigOp.DELETE, None)

    out = [ConfigResource(ConfigResourceType.BROKER, str(b),
                          {"leader.replication.throttled.rate": op(sc.rate),
                           "follower.replication.throttled.rate": op(sc.rate)}) for b in sc.brokers]
    out.append(ConfigResource(ConfigResourceType.TOPIC, topic,
                              {"leader.replication.throttled.replicas": op(leader),
                               "follower.replication.throttled.replicas": op(follower)}))
    return out


def set_throttle(bootstrap: str, sc: Scenario, topic: str, on: bool) -> None:
    """Set or remove the throttle; raises if any resource refused."""
    apply_configs(bootstrap, throttle_changes(sc, topic, on))


def apply_configs(bootstrap: str, resources: list) -> None:
    """IncrementalAlterConfigs of ``resources`` (kafka-python ConfigResources); raises if any refused."""
    admin = _admin(bootstrap)
    try:
        raw = admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
    finally:
        admin.close()
    bad = [f"{t} {n}: {r}" for t, by in raw.items() for n, r in by.items() if r != "OK"]
    if bad:
        raise RuntimeError("IncrementalAlterConfigs: " + "; ".join(bad))


def timed_move(bootstrap: str, sc: Scenario, topic: str) -> float | None:
    """Reassign and poll until the listing is empty: seconds, or None if stalled (then cancelled)."""
    from kafka.structs import TopicPartition
    admin = _admin(bootstrap)
    try:
        keys = [TopicPartition(topic, p) for p in sorted(sc.moves)]
        errors = admin.alter_partition_reassignments({TopicPartition(topic, p): list(dst)
                                                      for p, (_src, dst) in sc.moves.items()})
        bad = {str(k): e for k, e in errors.items() if e is not None}
        if bad:
            raise RuntimeError(f"AlterPartitionReassignments refused: {bad}")
        t0 = time.monotonic()
        while time.monotonic() - t0 < sc.timeout:
            time.sleep(POLL_S)
            if not admin.list_partition_reassignments(keys):
                return time.monotonic() - t0
        admin.alter_partition_reassignments({k: None for k in keys})  # cancel, so the run can clean up
        wait_until(lambda: not admin.list_partition_reassignments(keys), 60.0, "cancel to finish")
        return None
    finally:
        admin.close()


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` every 0.2 s; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(POLL_S)


class Producer(threading.Thread):
    """confluent-kafka, acks=all (or ``acks``), ``rate`` bytes/s into one partition, paced every 50 ms."""

    def __init__(self, bootstrap: str, topic: str, partition: int, rate: float, acks: str = "all") -> None:
        super().__init__(daemon=True, name=f"calibration-producer-{topic}")
        from confluent_kafka import Producer as CKProducer
        self.producer = CKProducer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                                    "compression.type": "none", "enable.idempotence": False})
        self.topic, self.partition, self.rate = topic, partition, rate
        self.stop_event = threading.Event()
        self.sent = 0
        self.errors: list[str] = []
        self.payload = os.urandom(RECORD_BYTES)  # incompressible, like load.fill

    def _done(self, err: object, _msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop_event.is_set():
            due = self.rate * (time.monotonic() - t0)
            while self.sent + RECORD_BYTES <= due:
                try:
                    self.producer.produce(self.topic, self.payload, partition=self.partition, on_delivery=self._done)
                except BufferError:
                    break
                self.sent += RECORD_BYTES
            self.producer.poll(0.05)
        self.producer.flush(30)
        # closed now: left to the collector it outlived the cluster and logged "Connection refused"
        self.producer.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(60)


@contextlib.contextmanager
def producing(bootstrap: str, topic: str, rate: float, acks: str = "all") -> Iterator[Producer | None]:
    """Run an in-sync producer for the duration (none if ``rate`` is 0), warmed up one quota window."""
    if rate <= 0:
        yield None
        return
    prod = Producer(bootstrap, topic, 0, rate, acks)
    prod.start()
    try:
        time.sleep(WARMUP_S)
        yield prod
    finally:
        prod.stop()


def run_scenario(bootstrap: str, sc: Scenario, topic: str) -> float | None:
    """Throttle, (produce,) move, and always remove the throttle: seconds or None if stalled."""
    set_throttle(bootstrap, sc, topic, True)
    # Brokers apply config changes from the metadata log a moment later; a move started at
    # once may copy its first megabytes unthrottled on the real cluster (seen: 16 MB at once).
    time.sleep(CONFIG_SETTLE_S)
    try:
        with producing(bootstrap, topic, sc.produce):
            return timed_move(bootstrap, sc, topic)
    finally:
        set_throttle(bootstrap, sc, topic, False)


# ------------------------------------------------------------------ the two sides
def sim_snapshot(sc: Scenario, topic: str) -> dict:
    """The simulator's copy of the real cluster: 6 brokers, 3 racks, 2 log dirs, the scenario's topic."""
    from kafka_local.cluster import rack_name
    brokers = [{"id": b, "rack": rack_name((b - 1) % RACKS),
                "log_dirs": [{"path": f"/data/d{d}", "capacity_bytes": 1e12} for d in range(LOG_DIRS)]}
               for b in range(1, BROKERS + 1)]
    parts = [{"partition": p, "replicas": list(src), "leader": src[0], "size_bytes": sc.bytes_per_partition,
              "bytes_in_per_sec": 0, "log_dirs": ["/data/d0"] * len(src),
              "batch_bytes": FILL_BATCH_BYTES}
             for p, (src, _dst) in sorted(sc.moves.items())]
    return {"version": 1, "brokers": brokers,
            "topics": [{"name": topic, "configs": dict(sc.topic_configs), "partitions": parts}]}


def on_simulator(sc: Scenario, topic: str = "calibration") -> float | None:
    """Run ``sc`` on a fresh SimulatedCluster at time scale 1 (the producer runs in real time)."""
    from kafka_sim import SimulatedCluster
    with SimulatedCluster(sim_snapshot(sc, topic), time_scale=1.0) as cluster:
        return run_scenario(cluster.bootstrap_servers, sc, topic)


def prepare_real(bootstrap: str, sc: Scenario, topic: str) -> None:
    """Create ``topic`` on the real cluster with the scenario's replicas and fill its partitions."""
    from kafka_local.load import create_topic, fill
    create_topic(bootstrap, topic, {p: list(src) for p, (src, _dst) in sc.moves.items()}, dict(sc.topic_configs))
    fill(bootstrap, topic, {p: sc.bytes_per_partition for p in sc.moves})


def on_real(bootstrap: str, sc: Scenario, topic: str) -> float | None:
    """Run ``sc`` on the real cluster: create and fill ``topic``, then the move."""
    prepare_real(bootstrap, sc, topic)
    return run_scenario(bootstrap, sc, topic)


def difference(real: float | None, sim: float | None) -> float | None:
    """(sim - real) / real in %, None when either stalled."""
    if real is None or sim is None or real <= 0:
        return None
    return 100.0 * (sim - real) / real


# ------------------------------------------------------------------ table and docs
def _cell(seconds: float | None, sc: Scenario) -> str:
    return f"{sc.unfinished} (> {sc.timeout:.0f})" if seconds is None else f"{seconds:.1f}"


def table(rows: Sequence[tuple[Scenario, float | None, float | None]]) -> str:
    """Markdown table: scenario | real Kafka s | simulator s | difference %."""
    lines = ["| scenario | real Kafka s | simulator s | difference % |", "|---|---|---|---|"]
    for sc, real, sim in rows:
        d = difference(real, sim)
        if d is not None:
            diff = f"{d:+.0f}"
        else:
            diff = f"both {sc.unfinished}" if real is None and sim is None else f"n/a (one {sc.unfinished})"
        lines.append(f"| {sc.name} | {_cell(real, sc)} | {_cell(sim, sc)} | {diff} |")
    return "\n".join(lines)


def merged_table(rows: Sequence[tuple[Scenario, float | None, float | None]], path: Path = DOCS) -> str:
    """:func:`table` of every scenario: ``rows`` where run now, the docs' row of the others (if any).

    A row whose scenario is no longer defined (renamed) is dropped.
    """
    doc = path.read_text()
    old = doc[doc.index(BEGIN):doc.index(END)].splitlines() if BEGIN in doc and END in doc else []
    kept = {line.split("|")[1].strip(): line for line in old[3:] if line.startswith("| ")}
    fresh = dict(zip((sc.name for sc, _real, _sim in rows), table(rows).splitlines()[2:]))
    lines = table([]).splitlines()
    lines += [fresh.get(sc.name) or kept[sc.name] for sc in scenarios() if sc.name in fresh or sc.name in kept]
    return "\n".join(lines)


def write_docs(text: str, path: Path = DOCS, begin: str = BEGIN, end: str = END) -> None:
    """Replace what is between the ``begin``/``end`` markers of ``path`` (appended if absent)."""
    doc = path.read_text()
    block = f"{begin}\n{text}\n{end}"
    if begin in doc and end in doc:
        doc = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _m: block, doc, flags=re.S)
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(doc)


@contextlib.contextmanager
def real_cluster() -> Iterator[str]:
    """Bootstrap of ``KAFKA_LOCAL_DIR``'s running cluster, or of one started (and stopped) here."""
    with local_kafka() as cluster:
        yield cluster.bootstrap_servers


@contextlib.contextmanager
def local_kafka() -> Iterator[LocalKafka]:
    """``KAFKA_LOCAL_DIR``'s running cluster, or one started (and stopped) here."""
    from kafka_local import LocalKafka
    if os.environ.get("KAFKA_LOCAL_DIR"):
        yield LocalKafka.load(os.environ["KAFKA_LOCAL_DIR"])
        return
    with tempfile.TemporaryDirectory(prefix="calibration-kafka-") as tmp:
        cluster = LocalKafka(tmp, BROKERS, RACKS, LOG_DIRS, owner_pid=os.getpid())
        cluster.up()
        try:
            yield cluster
        finally:
            cluster.down()


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = _admin(bootstrap)
    try:
        admin.delete_topics([topic])
    except Exception as exc:  # only frees disk; a failure must not hide the figures
        print(f"  (could not delete {topic}: {exc})", flush=True)
    finally:
        admin.close()


def run_both(kafka: LocalKafka, sc: Scenario, topic: str) -> tuple[float | None, float | None]:
    """``sc`` on the real cluster (``topic`` deleted after), then on a fresh simulator: (real, sim) seconds."""
    from benchmarks.calibration_timed import on_real_timed, on_simulator_timed
    observed: dict[str, float] = {}  # what the real run saw that the simulator must replay
    try:
        real = on_real_timed(kafka, sc, topic, observed) if sc.timed else on_real(kafka.bootstrap_servers, sc, topic)
    finally:
        _delete_topic(kafka.bootstrap_servers, topic)
    return real, on_simulator_timed(sc, observed) if sc.timed else on_simulator(sc)


def main(argv: list[str] | None = None) -> int:
    """Run every scenario on both sides, print the table and write it into docs/SIMULATOR.md."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="scenario name prefixes to run")
    ap.add_argument("--no-docs", action="store_true", help="print only, leave docs/SIMULATOR.md alone")
    ap.add_argument("--docs-rows", action="store_true",
                    help="with --only: rewrite only those scenarios' rows of the docs' table")
    args = ap.parse_args(argv or [])
    chosen = [sc for sc in scenarios() if not args.only or any(sc.name.startswith(o) for o in args.only)]
    rows: list[tuple[Scenario, float | None, float | None]] = []
    stamp = int(time.time())
    with local_kafka() as kafka:
        for i, sc in enumerate(chosen):
            topic = f"calibration-{stamp}-{i}"
            real, sim = run_both(kafka, sc, topic)
            print(f"  {sc.name}: real {_cell(real, sc)} s, simulator {_cell(sim, sc)} s", flush=True)
            rows.append((sc, real, sim))
    text = table(rows)
    print(text)
    if not args.no_docs and not args.only:
        write_docs(text)
    elif args.docs_rows and args.only:
        write_docs(merged_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
