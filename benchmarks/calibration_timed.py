"""Timed calibration scenarios beyond a plain throttled move (issue 19), on real Kafka and the simulator.

- c: a log-dir move (KIP-113 AlterReplicaLogDirs) under ``replica.alter.log.dirs.io.max.bytes.per.second``,
  timed from the request to DescribeLogDirs showing no future replica and the replica in the new dir;
- d: an in-sync follower slowed below the produce rate, timed from the slowdown to Metadata showing it
  out of the ISR. Kafka's KIP-73 throttle never slows an in-sync replica (ReplicaManager.shouldLeaderThrottle
  skips ISR members; RemoteLeaderEndPoint.shouldFollowerThrottle skips a fetch whose lag to the high
  watermark is 0, always so for an ISR member), so the real follower is slowed on its link instead:
  a ``tc`` htb class on the loopback shapes only the leader's replies on the follower's fetch
  connections; the simulator gets the same capacity on the follower's link (``set_network``);
- e: a throttled move whose receiving broker is killed (SIGKILL) a few seconds in and restarted,
  timed from the restarted broker back (DescribeCluster asked of it lists it unfenced) to the first
  empty listing; its time out (kill to back: a JVM's start-up, which varies with the machine's load
  and is no replication behaviour) is printed apart and replayed on the simulator, not compared.
- h: an in-sync follower's link shared with catching-up copies from the same leader: partition 0 of
  [1,2,3] written at 1 MB/s while eight unthrottled copies move onto broker 3, whose fetch replies
  from leader 1 are shaped to ``rate`` (as in d, from the same phase of the isr-expiration
  period); timed from the copies' start to 3 leaving partition 0's ISR. The premise of adaptive concurrency: a link full of copies starves the ISR.

``calibration.main`` runs these through :func:`on_real_timed` / :func:`on_simulator_timed`.
"""
from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Iterator

from benchmarks import calibration as cal
from benchmarks.shaped_links import ShapedLinks

if TYPE_CHECKING:
    from kafka_local import LocalKafka
    from kafka_sim import SimulatedCluster

MB = cal.MB
#: Kafka's broker default (not a dynamic config): the isr-expiration task runs every half of it
LAG_MAX_S = 30.0
#: the slowdown starts this far into an isr-expiration period on both sides, so the follower's
#: deadline (slowdown + LAG_MAX_S) falls mid-period and both remove it at the same check
ISR_PHASE_S = LAG_MAX_S / 4
KILL_AT_S, DOWN_S = 3.0, 5.0
#: a fresh quota sensor (a restarted broker's) lets this many seconds of its bound through at once
FRESH_SAMPLE_S = 1.0
_STAMP = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO "
#: ReplicaManager.startup, right after it schedules the isr-expiration task
_STARTUP = re.compile(_STAMP + r"\[LogDirFailureHandler\]: Starting")


# ------------------------------------------------------------------ the two sides
class RealSide:
    """A LocalKafka cluster: its brokers' dirs, kill/start, the follower link shaped with ``tc``."""

    def __init__(self, kafka: LocalKafka) -> None:
        self.kafka = kafka
        self.bootstrap = kafka.bootstrap_servers
        self.starting: threading.Thread | None = None

    def log_dirs(self, broker: int) -> list[str]:
        return list(self.kafka.brokers[broker].log_dirs)

    def address(self, broker: int) -> str:
        return f"127.0.0.1:{self.kafka.brokers[broker].port}"

    def kill(self, broker: int) -> None:
        self.kafka.kill_broker(broker)

    def start(self, broker: int) -> None:
        """Start ``broker`` again in the background: the move goes on while its JVM starts."""
        self.starting = threading.Thread(target=self.kafka.start_broker, args=(broker,), daemon=True)
        self.starting.start()

    def started(self) -> None:
        """Wait for ``start_broker`` (its own readiness poll) to return: the cluster's pids are saved."""
        if self.starting is not None:
            self.starting.join(180)

    def since_isr_check(self, leader: int) -> float:
        """Seconds since the leader's isr-expiration task last ran.

        ReplicaManager.startup schedules it at a fixed rate from that moment and logs
        "[LogDirFailureHandler]: Starting" right after, which anchors the phase.
        """
        return (time.time() - self._last_logged(leader, _STARTUP)) % (LAG_MAX_S / 2)

    def _last_logged(self, broker: int, line: re.Pattern[str]) -> float:
        """Epoch seconds of the last line of ``broker``'s server.log matching ``line`` (the JVM logs UTC here)."""
        log = self.kafka.directory / f"broker-{broker}" / "server.log"
        stamps = [m.group(1) for text in log.read_text(errors="replace").splitlines() if (m := line.match(text))]
        if not stamps:
            raise RuntimeError(f"no line like {line.pattern!r} in {log}")
        return datetime.strptime(stamps[-1], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc).timestamp()

    @contextlib.contextmanager
    def slowed(self, leader: int, follower: int, rate: float) -> Iterator[None]:
        """Shape the leader's replies on ``follower``'s fetch connections to ``rate`` bytes/s."""
        links = ShapedLinks(self.kafka, leader, (follower,), burst="128k")
        try:
            links.shape(rate)  # a failure half-way still has its qdisc removed below
            yield
        finally:
            links.clear()


class SimSide:
    """A SimulatedCluster at time scale 1: the same operations through its fault hooks."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap_servers

    def log_dirs(self, broker: int) -> list[str]:
        return [f"/data/d{d}" for d in range(cal.LOG_DIRS)]  # as cal.sim_snapshot lays them out

    def address(self, broker: int) -> str:
        host, port = self.cluster.endpoints[broker]
        return f"{host}:{port}"

    def kill(self, broker: int) -> None:
        self.cluster.stop_broker(broker)

    def start(self, broker: int) -> None:
        self.cluster.start_broker(broker)  # back at once: the caller kept it out as long as the real one

    def started(self) -> None:
        return None

    def since_isr_check(self, leader: int) -> float:
        # the simulator runs the isr-expiration check at multiples of the period from its time 0
        return self.cluster.model.now() % (LAG_MAX_S / 2)

    @contextlib.contextmanager
    def slowed(self, leader: int, follower: int, rate: float) -> Iterator[None]:
        before = self.cluster.model.brokers[follower].network_bytes_per_sec
        self.cluster.set_network(follower, rate)
        try:
            yield
        finally:
            self.cluster.set_network(follower, before)


Side = RealSide | SimSide
#: a timed run: (side, scenario, topic, what the real run observed, for the simulator) -> seconds
Run = Callable[[Side, cal.Scenario, str, dict[str, float]], "float | None"]


@dataclass(frozen=True)
class Timed:
    """How a timed scenario runs on one side."""

    run: Run


def _kafka_admin(bootstrap: str):
    from kafka_reassign.cluster.admin import KafkaAdmin
    return KafkaAdmin(bootstrap_servers=bootstrap, client_id="calibration", retry_attempts=3)


def _poll(done: Callable[[], bool], timeout: float) -> float | None:
    """Seconds until ``done()`` holds (polled every 0.2 s), None after ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        time.sleep(cal.POLL_S)
        if done():
            return time.monotonic() - t0
    return None


# ------------------------------------------------------------------ c: log-dir move
def log_dir_move(side: Side, sc: cal.Scenario, topic: str, observed: dict[str, float]) -> float | None:
    """Move partition 0's replica on broker 1 to its other dir under the KIP-113 io limit."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    def limit(on: bool) -> list:
        value = (AlterConfigOp.SET, str(sc.rate)) if on else (AlterConfigOp.DELETE, None)
        return [ConfigResource(ConfigResourceType.BROKER, "1",
                               {"replica.alter.log.dirs.io.max.bytes.per.second": value})]

    admin = _kafka_admin(side.bootstrap)
    cal.apply_configs(side.bootstrap, limit(True))
    time.sleep(cal.CONFIG_SETTLE_S)
    try:
        def rows() -> list[tuple[str, bool]]:
            return [(r.path, r.is_future) for r in admin.describe_log_dirs([1], [(topic, 0)])]

        current = next(path for path, future in rows() if not future)
        target = next(d for d in side.log_dirs(1) if d != current)
        errors = admin.alter_replica_log_dirs({(topic, 0, 1): target})
        if any(errors.values()):
            raise RuntimeError(f"AlterReplicaLogDirs refused: {errors}")
        return _poll(lambda: rows() == [(target, False)], sc.timeout)
    finally:
        cal.apply_configs(side.bootstrap, limit(False))
        admin.close()


# ------------------------------------------------------------------ d: slow follower leaves the ISR
def isr_shrink(side: Side, sc: cal.Scenario, topic: str, observed: dict[str, float]) -> float | None:
    """Produce into [1,2,3], slow follower 3's link to ``sc.rate`` (< the produce rate): time to leave the ISR."""
    admin = _kafka_admin(side.bootstrap)

    def isr() -> tuple[int, ...]:
        return admin.topic_metadata([topic])[0].partitions[0].isr

    try:
        # acks=1: Kafka answers a connection's requests one at a time, so an acks=all producer
        # would wait for the slow follower and write only as fast as it fetches (never behind)
        with cal.producing(side.bootstrap, topic, sc.produce, acks="1"):
            if sorted(isr()) != [1, 2, 3]:
                raise RuntimeError(f"ISR {isr()} before the slowdown: expected [1, 2, 3]")
            time.sleep((ISR_PHASE_S - side.since_isr_check(1)) % (LAG_MAX_S / 2))
            with side.slowed(1, 3, sc.rate):
                return _poll(lambda: 3 not in isr(), sc.timeout)
    finally:
        admin.close()


# ------------------------------------------------------------------ h: in-sync follower under copies
def isr_under_copies(side: Side, sc: cal.Scenario, topic: str, observed: dict[str, float]) -> float | None:
    """Produce into partition 0 of [1,2,3] while follower 3's link from leader 1 (``sc.rate``) also
    carries the unthrottled copies of the other partitions onto 3: time to 3 leaving 0's ISR."""
    from kafka.structs import TopicPartition
    admin, plain = _kafka_admin(side.bootstrap), cal._admin(side.bootstrap)
    copies = {TopicPartition(topic, p): list(dst) for p, (src, dst) in sc.moves.items() if src != dst}

    def isr() -> tuple[int, ...]:
        return admin.topic_metadata([topic])[0].partitions[0].isr

    try:
        with cal.producing(side.bootstrap, topic, sc.produce, acks="1"):
            cal.wait_until(lambda: sorted(isr()) == [1, 2, 3], 30, "partition 0's ISR to be [1, 2, 3]")
            time.sleep((ISR_PHASE_S - side.since_isr_check(1)) % (LAG_MAX_S / 2))  # as in d
            with side.slowed(1, 3, sc.rate):
                plain.alter_partition_reassignments(copies)
                try:
                    return _poll(lambda: 3 not in isr(), sc.timeout)
                finally:
                    plain.alter_partition_reassignments({tp: None for tp in copies})  # cancel what is left
                    cal.wait_until(lambda: not any(tp.topic == topic for tp in plain.list_partition_reassignments()),
                                   60, "the copies to be cancelled")
    finally:
        admin.close()
        plain.close()


# ------------------------------------------------------------------ e: receiving broker killed mid-move
def _back(address: str, broker: int) -> bool:
    """DescribeCluster asked of ``broker`` itself lists it unfenced (KRaft leaves fenced brokers out).

    Asked of the broker, not of the others: they keep a killed broker listed until its session
    times out (``broker.session.timeout.ms``, 9 s). A fresh client each time: it may be down.
    """
    from kafka.admin import KafkaAdminClient
    host, port = address.rsplit(":", 1)
    try:  # a refused connection at once, not after the client's bootstrap timeout
        socket.create_connection((host, int(port)), timeout=cal.POLL_S).close()
    except OSError:
        return False
    try:
        admin = KafkaAdminClient(bootstrap_servers=address, client_id="calibration", request_timeout_ms=2000,
                                 bootstrap_timeout_ms=2000)
    except Exception:  # noqa: BLE001 - refused or not answering yet: not back
        return False
    try:
        return any(int(b["broker_id"]) == broker and not b.get("is_fenced")
                   for b in admin.describe_cluster()["brokers"])
    except Exception:  # noqa: BLE001
        return False
    finally:
        admin.close()


def _copied(side: Side, topic: str) -> float:
    """Bytes broker 4's replica of partition 0 holds (DescribeLogDirs asked of it)."""
    admin = _kafka_admin(side.bootstrap)
    try:
        return float(sum(r.size for r in admin.describe_log_dirs([4], [(topic, 0)])))
    finally:
        admin.close()


def _moved(side: Side, topic: str, target: list[int]) -> bool:
    """Partition 0 of ``topic`` no longer listed as reassigning, and the metadata shows ``target``.

    A fresh client per poll: one that knew broker 4 before the kill may hang on it after; the
    client may still pick a broker just back as the controller (refused: not done yet).
    """
    from kafka.errors import KafkaError
    from kafka.structs import TopicPartition
    try:
        with contextlib.closing(cal._admin(side.bootstrap)) as poller:
            if poller.list_partition_reassignments([TopicPartition(topic, 0)]):
                return False
            (meta,) = poller.describe_topics([topic])
            return [p["replica_nodes"] for p in meta["partitions"]] == [target]
    except KafkaError:
        return False


def killed_mid_move(side: Side, sc: cal.Scenario, topic: str, observed: dict[str, float]) -> float | None:
    """Throttled [1,2,3] -> [4,2,3]; broker 4 is killed at KILL_AT_S and restarted DOWN_S later.

    Timed from broker 4 back (:func:`_back`, then its copy read) to the first empty listing: the
    restarted follower resuming from its log under the throttle. Not compared, printed: how long
    it was out (mostly a JVM's start-up, varying with the machine's load) and what it copied
    before it was back: a restarted Kafka broker starts its fetchers before it applies its
    throttle configs (BrokerMetadataPublisher.onMetadataUpdate: the topics delta, then the
    configs delta), 0.2 s at loopback speed on the local cluster, which the simulator leaves out.
    The simulator replays both (``observed``): its broker is killed once its copy holds what
    the real one held when back less the sample of throttle a fresh sensor lets through at once
    (the real broker's went before it was back), and stays out as long.
    """
    from kafka.structs import TopicPartition
    key = TopicPartition(topic, 0)
    cal.set_throttle(side.bootstrap, sc, topic, True)
    time.sleep(cal.CONFIG_SETTLE_S)
    try:
        with contextlib.closing(cal._admin(side.bootstrap)) as admin:
            errors = admin.alter_partition_reassignments({key: list(sc.moves[0][1])})
        if any(e is not None for e in errors.values()):
            raise RuntimeError(f"AlterPartitionReassignments refused: {errors}")
        if "copied" in observed:
            # the real broker's fresh quota sensor let one sample through before it was back;
            # the simulator's lets it through on the restart: kill that much earlier
            held = observed["copied"] - sc.rate * FRESH_SAMPLE_S
            if _poll(lambda: _copied(side, topic) >= held, sc.timeout) is None:
                raise RuntimeError(f"broker 4 never held {held / MB:.1f} MB")
        else:
            time.sleep(KILL_AT_S)
        side.kill(4)
        down_at = time.monotonic()
        time.sleep(max(observed.get("down_s", DOWN_S), DOWN_S))
        side.start(4)
        if _poll(lambda: _back(side.address(4), 4), sc.timeout) is None:
            raise RuntimeError(f"broker 4 not back {sc.timeout:.0f} s after its restart")
        copied = _copied(side, topic)
        back_at = time.monotonic()
        observed.setdefault("down_s", back_at - down_at)
        observed.setdefault("copied", copied)
        print(f"    broker 4 out for {back_at - down_at:.1f} s (kill to back), its copy then {copied / MB:.1f} MB "
              "(not compared)", flush=True)
        left = _poll(lambda: _moved(side, topic, list(sc.moves[0][1])), sc.timeout)
        return None if left is None else time.monotonic() - back_at
    finally:
        side.started()
        cal.set_throttle(side.bootstrap, sc, topic, False)


# ------------------------------------------------------------------ scenarios and runners
def timed_scenarios() -> list[cal.Scenario]:
    """c, d, e and h (see the module docstring)."""
    one = {0: ((1, 2, 3), (1, 2, 3))}
    return [
        cal.Scenario("c: log-dir move, 30 MB, 3 MB/s io limit", one, 30 * MB, 3 * MB, timeout=60.0,
                     timed=Timed(log_dir_move)),
        cal.Scenario("d: follower slowed to 0.5 MB/s under a 1.5 MB/s producer, leaves ISR", one, 5 * MB,
                     MB // 2, produce=1.5 * MB, timeout=60.0, timed=Timed(isr_shrink)),
        cal.Scenario(f"e: 40 MB, 2 MB/s, broker 4 killed at {KILL_AT_S:.0f} s, started again {DOWN_S:.0f} s later; "
                     "back to done",
                     {0: ((1, 2, 3), (4, 2, 3))}, 40 * MB, 2 * MB, timeout=90.0, timed=Timed(killed_mid_move)),
        cal.Scenario("h: follower 3's link at 3 MB/s carries a 1 MB/s in-sync partition and 8 x 20 MB copies "
                     "(unthrottled), leaves ISR", {0: ((1, 2, 3), (1, 2, 3)),
                                                   **{p: ((1, 2, 4), (1, 2, 3)) for p in range(1, 9)}},
                     20 * MB, 3 * MB, produce=1.0 * MB, timeout=75.0, unfinished="stayed in ISR",
                     timed=Timed(isr_under_copies)),
    ]


def on_real_timed(kafka: LocalKafka, sc: cal.Scenario, topic: str, observed: dict[str, float]) -> float | None:
    """Create and fill ``topic`` on the real cluster, then the scenario's timed run."""
    assert sc.timed is not None
    cal.prepare_real(kafka.bootstrap_servers, sc, topic)
    return sc.timed.run(RealSide(kafka), sc, topic, observed)


def on_simulator_timed(sc: cal.Scenario, observed: dict[str, float], topic: str = "calibration") -> float | None:
    """The scenario's timed run on a fresh SimulatedCluster at time scale 1."""
    from kafka_sim import SimulatedCluster
    assert sc.timed is not None
    with SimulatedCluster(cal.sim_snapshot(sc, topic), time_scale=1.0) as cluster:
        return sc.timed.run(SimSide(cluster), sc, topic, observed)
