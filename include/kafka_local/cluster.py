"""One KRaft controller and N brokers on 127.0.0.1, each its own JVM.

The cluster's layout (ports, racks, log dirs, pids) lives in ``<dir>/cluster.json`` so that
``kafka-local`` commands run from other processes act on the same cluster. A broker keeps its
port, rack and log dirs across restarts.
"""
from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_local.jvm import (KAFKA_VERSION, LocalKafkaError, alive, is_node, java_command, jvms_of, kill_all,
                             spawn, terminate)

CONTROLLER_ID = 3000
_LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""


@dataclass
class NodeSpec:
    """One JVM of the cluster: its id, role, listener port, rack and log dirs."""

    node_id: int
    role: str
    port: int
    rack: str | None = None
    log_dirs: list[str] = field(default_factory=list)
    pid: int | None = None

    @property
    def name(self) -> str:
        return f"{self.role}-{self.node_id}"


def rack_name(index: int) -> str:
    """rack-a, rack-b, ... (the simulator's names, so snapshots of both read alike)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    name, i = "", index + 1
    while i:
        i, r = divmod(i - 1, 26)
        name = letters[r] + name
    return f"rack-{name}"


def _why(output: str) -> str:
    """The lines of a JVM's output that say what went wrong (its INFO chatter left out)."""
    lines = [line for line in output.splitlines() if "Exception" in line or " ERROR " in line]
    return "\n".join(lines[:5]) or output[-2000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_id() -> str:
    # Like Kafka's Uuid.randomUuid: never a leading "-", which command lines read as an option.
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


class LocalKafka:
    """A local Apache Kafka cluster in ``directory``.

    :param directory: where configs, data, logs and ``cluster.json`` live
    :param brokers: number of broker JVMs (ids 1..N)
    :param racks: brokers are spread round-robin over this many racks
    :param log_dirs: log.dirs per broker (JBOD)
    :param broker_heap_mb: heap of each broker JVM
    :param configs: extra broker configs (``replica.lag.time.max.ms``...)
    :param owner_pid: when set, a watchdog kills every JVM once this process is gone
    """

    def __init__(self, directory: str | Path, brokers: int = 3, racks: int = 1, log_dirs: int = 1, *,
                 broker_heap_mb: int = 320, controller_heap_mb: int = 192,
                 configs: dict[str, str] | None = None, owner_pid: int | None = None) -> None:
        if brokers < 1 or not 1 <= racks <= brokers or log_dirs < 1:
            raise LocalKafkaError(f"need brokers >= 1, 1 <= racks <= brokers, log-dirs >= 1 "
                                  f"(got brokers={brokers} racks={racks} log-dirs={log_dirs})")
        self.directory = Path(directory).resolve()
        self.broker_heap_mb, self.controller_heap_mb = broker_heap_mb, controller_heap_mb
        self.configs = dict(configs or {})
        self.owner_pid = owner_pid
        self.cluster_id = ""
        self.down_requested = False
        self.controller = NodeSpec(CONTROLLER_ID, "controller", 0)
        self.brokers: dict[int, NodeSpec] = {
            b: NodeSpec(b, "broker", 0, rack_name((b - 1) % racks),
                        [str(self.directory / f"broker-{b}" / f"data-{k}") for k in range(log_dirs)])
            for b in range(1, brokers + 1)}

    # -- state file --------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.directory / "cluster.json"

    def save(self) -> None:
        data = {"kafka_version": KAFKA_VERSION, "cluster_id": self.cluster_id, "down": self.down_requested,
                "owner_pid": self.owner_pid, "broker_heap_mb": self.broker_heap_mb,
                "controller_heap_mb": self.controller_heap_mb, "configs": self.configs,
                "controller": asdict(self.controller),
                "brokers": [asdict(b) for b in self.brokers.values()],
                "bootstrap": self.bootstrap_servers}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.state_file)

    @classmethod
    def load(cls, directory: str | Path) -> "LocalKafka":
        """The cluster recorded in ``directory`` (by an ``up`` in any process)."""
        path = Path(directory).resolve() / "cluster.json"
        if not path.exists():
            raise LocalKafkaError(f"no local Kafka cluster in {path.parent} (run `kafka-local up --dir {directory}`)")
        data = json.loads(path.read_text())
        self = cls.__new__(cls)
        self.directory = path.parent
        self.broker_heap_mb, self.controller_heap_mb = data["broker_heap_mb"], data["controller_heap_mb"]
        self.configs, self.owner_pid = data["configs"], data["owner_pid"]
        self.cluster_id, self.down_requested = data["cluster_id"], data["down"]
        self.controller = NodeSpec(**data["controller"])
        self.brokers = {b["node_id"]: NodeSpec(**b) for b in data["brokers"]}
        return self

    def _reload_pids(self) -> None:
        """Take the pids another process (``kafka-local start-broker``) recorded since."""
        if not self.state_file.exists():
            return
        data = json.loads(self.state_file.read_text())
        if data.get("cluster_id") != self.cluster_id:
            return
        self.controller.pid = data["controller"]["pid"]
        for b in data["brokers"]:
            if b["node_id"] in self.brokers:
                self.brokers[b["node_id"]].pid = b["pid"]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    # -- configs ---------------------------------------------------------------------------
    def _common(self) -> dict[str, str]:
        return {"controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:{self.controller.port}",
                "controller.listener.names": "CONTROLLER"}

    def _controller_props(self) -> dict[str, str]:
        return {**self._common(), "process.roles": "controller", "node.id": str(CONTROLLER_ID),
                "listeners": f"CONTROLLER://127.0.0.1:{self.controller.port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                "log.dirs": str(self.directory / "controller" / "data")}

    def _broker_props(self, spec: NodeSpec) -> dict[str, str]:
        n = len(self.brokers)
        rf, min_isr = str(min(3, n)), str(min(2, n))
        props = {**self._common(), "process.roles": "broker", "node.id": str(spec.node_id),
                 "listeners": f"PLAINTEXT://127.0.0.1:{spec.port}",
                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{spec.port}",
                 "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                 "inter.broker.listener.name": "PLAINTEXT", "broker.rack": spec.rack or "",
                 "log.dirs": ",".join(spec.log_dirs),
                 # Small thread pools and internal topics: seven JVMs share a laptop.
                 "num.network.threads": "2", "num.io.threads": "2", "background.threads": "2",
                 "offsets.topic.num.partitions": "4", "offsets.topic.replication.factor": rf,
                 "transaction.state.log.num.partitions": "4",
                 "transaction.state.log.replication.factor": rf, "transaction.state.log.min.isr": min_isr,
                 "share.coordinator.state.topic.replication.factor": rf,
                 "share.coordinator.state.topic.min.isr": min_isr,
                 "group.initial.rebalance.delay.ms": "0", "log.cleaner.dedupe.buffer.size": "8388608"}
        props.update(self.configs)
        return props

    def _write_props(self, spec: NodeSpec) -> Path:
        props = self._controller_props() if spec.role == "controller" else self._broker_props(spec)
        path = self.directory / spec.name / "server.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def _jvm(self, spec: NodeSpec, main: str, args: list[str]) -> list[str]:
        heap = self.controller_heap_mb if spec.role == "controller" else self.broker_heap_mb
        return java_command(main, args, heap_mb=heap, directory=self.directory, node=spec.name,
                            log4j=self.directory / "log4j2.properties")

    def nodes(self) -> list[NodeSpec]:
        return [self.controller, *self.brokers.values()]

    # -- lifecycle ---------------------------------------------------------------------------
    def up(self, timeout: float = 180.0) -> str:
        """Format storage, start every JVM, wait until every broker is registered and unfenced.

        On any failure every JVM started is killed before the error is raised.
        :return: the bootstrap servers
        """
        if jvms_of(self.directory):
            raise LocalKafkaError(f"a local Kafka cluster already runs in {self.directory} (run `kafka-local down`)")
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "log4j2.properties").write_text(_LOG4J)
        self.controller.port = _free_port()
        for spec in self.brokers.values():
            spec.port = _free_port()
        self.cluster_id, self.down_requested = _cluster_id(), False
        self.save()
        try:
            self._start_watchdog()
            self._format()
            for spec in self.nodes():
                self._start(spec)
            self.wait_ready(list(self.brokers), timeout)
        except BaseException:
            self.down()
            raise
        return self.bootstrap_servers

    def _start_watchdog(self) -> None:
        if self.owner_pid:
            subprocess.Popen([sys.executable, "-m", "kafka_local.watchdog", "--dir", str(self.directory),
                              "--owner", str(self.owner_pid), f"--cluster-id={self.cluster_id}"],
                             start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _format(self) -> None:
        """kafka-storage format of every node, all JVMs at once (each takes seconds to start)."""
        import shutil
        running = []
        for spec in self.nodes():
            shutil.rmtree(self.directory / spec.name, ignore_errors=True)
            props = self._write_props(spec)
            cmd = self._jvm(spec, "kafka.tools.StorageTool",
                            ["format", f"--cluster-id={self.cluster_id}", "-c", str(props)])
            running.append((spec, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, start_new_session=True)))
        for spec, proc in running:
            out, _ = proc.communicate(timeout=180)
            if proc.returncode != 0:
                raise LocalKafkaError(f"kafka-storage format of {spec.name} failed: {_why(out.decode())}")

    def _start(self, spec: NodeSpec) -> None:
        if is_node(spec.pid, self.directory, spec.name):
            raise LocalKafkaError(f"{spec.name} already runs (pid {spec.pid})")
        props = self._write_props(spec)
        proc = spawn(self._jvm(spec, "kafka.Kafka", [str(props)]), self.directory / spec.name / "server.log")
        spec.pid = proc.pid
        self.save()

    def down(self) -> list[int]:
        """Stop every JVM of the cluster (SIGKILL: its data is thrown away next ``up``)."""
        self.down_requested = True
        if self.state_file.exists():
            self.save()
        killed = kill_all(self.directory)
        for spec in self.nodes():
            spec.pid = None
        if self.state_file.exists():
            self.save()
        return killed

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL one broker's JVM (a crash: no controlled shutdown)."""
        self._reload_pids()
        spec = self._broker(broker_id)
        if not is_node(spec.pid, self.directory, spec.name):
            raise LocalKafkaError(f"broker {broker_id} is not running")
        terminate(spec.pid or 0, signal.SIGKILL)
        spec.pid = None
        self.save()

    def stop_broker(self, broker_id: int, timeout: float = 120.0) -> None:
        """SIGTERM: Kafka's controlled shutdown (leadership moves away first), then wait for exit."""
        self._reload_pids()
        spec = self._broker(broker_id)
        if not is_node(spec.pid, self.directory, spec.name):
            raise LocalKafkaError(f"broker {broker_id} is not running")
        terminate(spec.pid or 0, signal.SIGTERM, timeout=timeout)
        spec.pid = None
        self.save()

    def start_broker(self, broker_id: int, timeout: float = 120.0) -> None:
        """Start a stopped broker on its old port and log dirs; wait until it is unfenced."""
        self._reload_pids()
        self._start(self._broker(broker_id))
        self.wait_ready([broker_id], timeout)

    def _broker(self, broker_id: int) -> NodeSpec:
        if broker_id not in self.brokers:
            raise LocalKafkaError(f"no broker {broker_id} in this cluster (brokers: {sorted(self.brokers)})")
        return self.brokers[broker_id]

    # -- readiness and status ----------------------------------------------------------------
    def registered_brokers(self, timeout_s: float = 5.0, via: list[NodeSpec] | None = None) -> set[int]:
        """Broker ids the cluster's metadata lists as unfenced (KRaft leaves fenced brokers out).

        :param via: ask only these brokers (default: every running one)
        """
        from kafka import KafkaAdminClient
        live = [b for b in (via or self.brokers.values()) if alive(b.pid)]
        if not live:
            return set()
        try:
            admin = KafkaAdminClient(bootstrap_servers=",".join(f"127.0.0.1:{b.port}" for b in live),
                                     request_timeout_ms=int(timeout_s * 1000), client_id="kafka-local")
        except Exception:  # noqa: BLE001 - not up yet: nothing registered
            return set()
        try:
            return {int(b["broker_id"]) for b in admin.describe_cluster()["brokers"] if not b.get("is_fenced")}
        except Exception:  # noqa: BLE001
            return set()
        finally:
            admin.close()

    def wait_ready(self, broker_ids: list[int], timeout: float) -> None:
        """Wait until every running broker, each of ``broker_ids`` included, lists them unfenced.

        Asking the broker itself matters after a crash: the controller keeps a killed broker
        registered until its session times out (broker.session.timeout.ms, 9 s), so the others
        may list it before the new JVM answers at all. Asking each of the others matters too:
        each learns of the unfencing from the metadata log a moment later. Fails fast if a JVM died.
        """
        deadline = time.monotonic() + timeout
        pending = set(broker_ids)
        while True:
            for spec in [self.controller, *(self.brokers[b] for b in broker_ids)]:
                if not alive(spec.pid):
                    raise LocalKafkaError(f"{spec.name} exited during start-up; its log: "
                                          f"{self.directory / spec.name / 'server.log'}\n{self._tail(spec)}")
            views = [self.registered_brokers(via=[spec]) for spec in self.brokers.values() if alive(spec.pid)]
            pending = {b for b in pending if not all(b in seen for seen in views)}
            if not pending:
                return
            if time.monotonic() > deadline:
                raise LocalKafkaError(f"brokers {sorted(pending)} not registered and unfenced "
                                      f"after {timeout:.0f} s (logs in {self.directory})")
            time.sleep(0.5)

    def _tail(self, spec: NodeSpec, lines: int = 20) -> str:
        path = self.directory / spec.name / "server.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def status(self) -> list[dict[str, Any]]:
        """One row per JVM: id, role, port, rack, pid, running, registered."""
        self._reload_pids()
        registered = self.registered_brokers()
        rows = []
        for spec in self.nodes():
            running = is_node(spec.pid, self.directory, spec.name)
            rows.append({"node": spec.node_id, "role": spec.role, "port": spec.port, "rack": spec.rack,
                         "pid": spec.pid if running else None, "running": running,
                         "registered": spec.node_id in registered if spec.role == "broker" else None,
                         "log_dirs": spec.log_dirs})
        return rows
