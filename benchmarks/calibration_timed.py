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
  timed from AlterPartitionReassignments to the first empty listing.

``calibration.main`` runs these through :func:`on_real_timed` / :func:`on_simulator_timed`.
"""
from __future__ import annotations

import contextlib
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Iterator

from benchmarks import calibration as cal

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
_STAMP = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO "
#: ReplicaManager.startup, right after it schedules the isr-expiration task
_STARTUP = re.compile(_STAMP + r"\[LogDirFailureHandler\]: Starting")
#: BrokerLifecycleManager: the controller let the broker in again
_UNFENCED = re.compile(_STAMP + r"\[BrokerLifecycleManager id=\d+\] The broker has been unfenced")


# ------------------------------------------------------------------ the two sides
class RealSide:
    """A LocalKafka cluster: its brokers' dirs, kill/start, the follower link shaped with ``tc``."""

    def __init__(self, kafka: LocalKafka) -> None:
        self.kafka = kafka
        self.bootstrap = kafka.bootstrap_servers
        self.killed_at = 0.0  # epoch seconds of the last kill
        self.starting: threading.Thread | None = None

    def log_dirs(self, broker: int) -> list[str]:
        return list(self.kafka.brokers[broker].log_dirs)

    def kill(self, broker: int) -> None:
        self.killed_at = time.time()
        self.kafka.kill_broker(broker)

    def start(self, broker: int) -> None:
        """Start ``broker`` again in the background: the move goes on while its JVM starts."""
        self.starting = threading.Thread(target=self.kafka.start_broker, args=(broker,), daemon=True)
        self.starting.start()

    def out_seconds(self, broker: int) -> float | None:
        """Seconds ``broker`` was out: from the kill to the controller unfencing it (its log).

        Not until ``start_broker`` returns: its readiness poll adds seconds the cluster does not see.
        """
        if self.starting is not None:
            self.starting.join(180)
        return self._last_logged(broker, _UNFENCED) - self.killed_at

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
        port = self.kafka.brokers[leader].port
        pid = self.kafka.brokers[follower].pid
        ss = subprocess.run(["ss", "-tnpH", "state", "established", f"( dport = :{port} )"],
                            capture_output=True, text=True, check=True).stdout
        fetch_ports = [line.split()[2].rsplit(":", 1)[1] for line in ss.splitlines() if f"pid={pid}," in line]
        if not fetch_ports:
            raise RuntimeError(f"broker {follower} (pid {pid}) has no connection to broker {leader}:{port}")
        if "noqueue" not in _tc("qdisc", "show", "dev", "lo"):
            raise RuntimeError("the loopback already has a qdisc (someone else is shaping it): not touching it")
        # htb without a default class: unmatched traffic (everyone else's) goes out directly
        _tc("qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb")
        try:
            bits = f"{int(rate * 8)}bit"
            _tc("class", "add", "dev", "lo", "parent", "1:", "classid", "1:3", "htb", "rate", bits, "ceil", bits,
                "burst", "128k", "cburst", "128k")
            for fetch_port in fetch_ports:
                _tc("filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                    "match", "ip", "sport", str(port), "0xffff", "match", "ip", "dport", fetch_port, "0xffff",
                    "flowid", "1:3")
            yield
        finally:
            _tc("qdisc", "del", "dev", "lo", "root")


def _tc(*args: str) -> str:
    return subprocess.run(["tc", *args], capture_output=True, text=True, check=True).stdout


class SimSide:
    """A SimulatedCluster at time scale 1: the same operations through its fault hooks."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap_servers

    def log_dirs(self, broker: int) -> list[str]:
        return [f"/data/d{d}" for d in range(cal.LOG_DIRS)]  # as cal.sim_snapshot lays them out

    def kill(self, broker: int) -> None:
        self.cluster.stop_broker(broker)

    def start(self, broker: int) -> None:
        self.cluster.start_broker(broker)

    def out_seconds(self, broker: int) -> float | None:
        return None  # back at once: the caller kept it out as long as the real one

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


# ------------------------------------------------------------------ e: receiving broker killed mid-move
def killed_mid_move(side: Side, sc: cal.Scenario, topic: str, observed: dict[str, float]) -> float | None:
    """Throttled [1,2,3] -> [4,2,3]; broker 4 is killed at KILL_AT_S and restarted DOWN_S later.

    A real broker is back once unfenced (its JVM start-up adds seconds): the real run records how
    long it was out in ``observed["down_s"]`` and the simulator keeps its broker out as long.
    """
    from kafka.errors import KafkaError
    from kafka.structs import TopicPartition
    key = TopicPartition(topic, 0)
    cal.set_throttle(side.bootstrap, sc, topic, True)
    time.sleep(cal.CONFIG_SETTLE_S)
    try:
        with contextlib.closing(cal._admin(side.bootstrap)) as admin:
            errors = admin.alter_partition_reassignments({key: list(sc.moves[0][1])})
        if any(e is not None for e in errors.values()):
            raise RuntimeError(f"AlterPartitionReassignments refused: {errors}")
        t0 = time.monotonic()
        time.sleep(KILL_AT_S)
        side.kill(4)
        down_at = time.monotonic()
        time.sleep(observed.get("down_s", DOWN_S))  # the simulator: as long as the real broker was out
        side.start(4)

        def moved() -> bool:
            # a fresh client per poll: one that knew broker 4 before the kill may hang on it after;
            # while 4 is out the client may still pick it as the controller (refused: not done yet)
            try:
                with contextlib.closing(cal._admin(side.bootstrap)) as poller:
                    return not poller.list_partition_reassignments([key])
            except KafkaError:
                return False

        left = _poll(moved, sc.timeout - (time.monotonic() - t0))
        took = time.monotonic() - t0
        out = side.out_seconds(4)  # the real broker's start-up joined: the throttle can come off it
        observed.setdefault("down_s", out if out is not None else time.monotonic() - down_at)
        print(f"    broker 4 out for {observed['down_s']:.1f} s (kill to unfenced)", flush=True)
        return None if left is None else took
    finally:
        cal.set_throttle(side.bootstrap, sc, topic, False)


# ------------------------------------------------------------------ scenarios and runners
def timed_scenarios() -> list[cal.Scenario]:
    """c, d and e (see the module docstring)."""
    one = {0: ((1, 2, 3), (1, 2, 3))}
    return [
        cal.Scenario("c: log-dir move, 30 MB, 3 MB/s io limit", one, 30 * MB, 3 * MB, timeout=60.0,
                     timed=Timed(log_dir_move)),
        cal.Scenario("d: follower slowed to 0.5 MB/s under a 1.5 MB/s producer, leaves ISR", one, 5 * MB,
                     MB // 2, produce=1.5 * MB, timeout=60.0, timed=Timed(isr_shrink)),
        cal.Scenario(f"e: 20 MB, 2 MB/s, broker 4 killed at {KILL_AT_S:.0f} s, started again {DOWN_S:.0f} s later",
                     {0: ((1, 2, 3), (4, 2, 3))}, 20 * MB, 2 * MB, timeout=90.0, timed=Timed(killed_mid_move)),
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
