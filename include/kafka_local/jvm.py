"""Java, Kafka's jars and the JVM processes of a local cluster.

Every JVM a cluster starts carries ``-Dkafka.local.dir=<its directory>`` on its command line,
so the processes of one cluster are found from ``/proc`` even when a pid file was lost, and a
recycled pid is never mistaken for a broker.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

KAFKA_VERSION = "4.3.1"
#: Where ``make setup`` copies Kafka's jars (``kafka/pom.xml``), unless $KAFKA_LOCAL_LIBS says.
DEFAULT_LIBS = Path(__file__).resolve().parents[2] / "kafka" / "lib"
MARKER = "-Dkafka.local.dir="
#: JVM flags for a laptop-sized cluster: seven JVMs share two cores, so C1 only and a serial GC.
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1",
             "-Xss512k", "-Djava.awt.headless=true")


class LocalKafkaError(RuntimeError):
    """A local cluster could not be set up, started or reached (the message says why)."""


def java_binary() -> str:
    """The ``java`` to run (``$JAVA_HOME/bin/java`` first), checked to be Java 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if not java:
        raise LocalKafkaError("Java 17 or newer is needed to run Kafka: no `java` on PATH and no "
                              "$JAVA_HOME (install OpenJDK 17)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    m = re.search(r'version "(\d+)', out.stderr + out.stdout)
    if not m or int(m.group(1)) < 17:
        raise LocalKafkaError(f"Kafka {KAFKA_VERSION} needs Java 17 or newer; {java} is "
                              f"{(out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else 'unknown'}")
    return java


def kafka_libs() -> Path:
    """The folder of Kafka's jars, checked to hold the broker of :data:`KAFKA_VERSION`."""
    libs = Path(os.environ.get("KAFKA_LOCAL_LIBS") or DEFAULT_LIBS)
    if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        raise LocalKafkaError(f"Apache Kafka {KAFKA_VERSION} jars not found in {libs}: run `make setup` "
                              "(it fetches them from Maven Central with `mvn`, from kafka/pom.xml)")
    return libs


def java_command(main: str, args: list[str], *, heap_mb: int, directory: Path, node: str,
                 log4j: Path | None = None) -> list[str]:
    """The command line of one JVM of the cluster at ``directory``."""
    cmd = [java_binary(), f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", *JVM_FLAGS,
           f"{MARKER}{directory.resolve()}", f"-Dkafka.local.node={node}"]
    if log4j is not None:
        cmd.append(f"-Dlog4j2.configurationFile={log4j}")
    return [*cmd, "-cp", str(kafka_libs() / "*"), main, *args]


def spawn(cmd: list[str], log_file: Path) -> subprocess.Popen:
    """Start a JVM in its own session (a terminal's Ctrl-C is for the caller, not the broker)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def alive(pid: int | None) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def jvms_of(directory: Path) -> dict[int, str]:
    """Running JVMs of the cluster at ``directory``: pid -> node name."""
    marker = f"{MARKER}{directory.resolve()}"
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        args = _cmdline(int(entry))
        if marker in args and alive(int(entry)):
            node = next((a.split("=", 1)[1] for a in args if a.startswith("-Dkafka.local.node=")), "?")
            found[int(entry)] = node
    return found


def is_node(pid: int | None, directory: Path, node: str) -> bool:
    """Whether ``pid`` is the running JVM of ``node`` in the cluster at ``directory``."""
    return bool(pid) and jvms_of(directory).get(pid) == node  # type: ignore[arg-type]


def terminate(pid: int, sig: int = signal.SIGKILL, timeout: float = 60.0) -> bool:
    """Send ``sig`` and wait until the process is gone; SIGKILL after ``timeout``. True if it was running."""
    if not alive(pid):
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while alive(pid):
        _reap(pid)
        if time.monotonic() > deadline and sig != signal.SIGKILL:
            os.kill(pid, signal.SIGKILL)
            sig = signal.SIGKILL
            deadline = time.monotonic() + 30
        elif time.monotonic() > deadline:
            raise LocalKafkaError(f"process {pid} did not exit after SIGKILL")
        time.sleep(0.05)
    _reap(pid)
    return True


def _reap(pid: int) -> None:
    # Our own children stay zombies until waited for; other processes' children are not ours to reap.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def kill_all(directory: Path) -> list[int]:
    """SIGKILL every JVM of the cluster at ``directory``; the pids killed."""
    pids = list(jvms_of(directory))
    for pid in pids:
        terminate(pid, signal.SIGKILL)
    return pids
