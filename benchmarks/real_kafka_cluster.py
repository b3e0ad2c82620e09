"""The real Kafka cluster of the real-Kafka benchmark: starting it, Kafka's own tools, configs and topics.

Configs are read back and written as "someone else" (confluent-kafka and kafka-python, not
the tool's client), so the tables never trust the tool's own view.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from kafka_local import LocalKafka

ROOT = Path(__file__).resolve().parents[1]
BROKERS, RACKS, LOG_DIRS = 6, 3, 2
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_LIST, FOLLOWER_LIST = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
QUIET_LOG4J = "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = ERR\nappender.err.type = Console\n" \
              "appender.err.name = ERR\nappender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n" \
              "appender.err.layout.pattern = %p %m%n\n"
SETTING = tuple[str, str, str]


@dataclass
class Bench:
    """The running cluster, its bootstrap servers and a work directory for plans and records."""

    cluster: LocalKafka
    bootstrap: str
    work: Path

    @property
    def brokers(self) -> list[int]:
        return sorted(self.cluster.brokers)


def start_cluster(work: Path) -> tuple[LocalKafka, bool]:
    """(cluster, owned): our own 6-broker cluster, or the one ``KAFKA_LOCAL_DIR`` names (kept running)."""
    from kafka_local import LocalKafka
    if os.environ.get("KAFKA_LOCAL_DIR"):
        return LocalKafka.load(os.environ["KAFKA_LOCAL_DIR"]), False
    cluster = LocalKafka(work / "cluster", BROKERS, RACKS, LOG_DIRS, owner_pid=os.getpid())
    cluster.up(timeout=300)
    return cluster, True


# -- Kafka's own tools and ours -----------------------------------------------------------------

def java(bench: Bench, main: str, args: list[str], timeout: float = 300) -> tuple[int, str]:
    """Run one of Kafka's tools from kafka/lib (logging at WARN, to stderr); (exit code, stdout)."""
    log4j = bench.work / "tools-log4j2.properties"
    if not log4j.exists():
        log4j.write_text(QUIET_LOG4J)
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", str(ROOT / "kafka" / "lib" / "*"),
           f"-Dlog4j2.configurationFile={log4j}", main, "--bootstrap-server", bench.bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def config_command_throttles(bench: Bench, topics: list[str]) -> list[str]:
    """Throttle lines of ``ConfigCommand --describe`` for every broker, the default and ``topics``."""
    jobs = [["--describe", "--entity-type", "brokers"]]
    jobs += [["--describe", "--entity-type", "topics", "--entity-name", t] for t in topics]
    outs: list[str] = [""] * len(jobs)

    def one(i: int) -> None:
        outs[i] = java(bench, "kafka.admin.ConfigCommand", jobs[i])[1]

    # Each JVM takes ~20 s to start on a loaded machine: run them side by side.
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines, owner = [], ""
    for out in outs:
        for line in out.splitlines():
            if line.startswith(("Dynamic configs for", "Default configs for")):
                owner = line.split(" are:")[0].replace("Dynamic configs for ", "").replace("Default configs for ", "")
            elif "throttled" in line or "alter.log.dirs.io" in line:
                lines.append(f"{owner}: {line.strip().split(' sensitive=')[0]}")
    return lines


def ours_command(bench: Bench, plan: Path, throttle: str, *extra: str) -> list[str]:
    """``kafka-reassign execute`` as an operator types it (its records in the work directory)."""
    exe = Path(sys.executable).parent / "kafka-reassign"
    return [str(exe), "execute", "--bootstrap-server", bench.bootstrap, "--plan", str(plan), "--throttle", throttle,
            "--record-dir", str(bench.work / "records"), *extra]


# -- reading and writing configs as "someone else" (confluent-kafka, not the tool's client) ----

def others_set(bench: Bench, values: Mapping[SETTING, str | None]) -> None:
    """Another admin (kafka-python, incremental) writes configs; None deletes.

    Broker "" is the cluster-wide default, which kafka-python cannot address: Kafka's ConfigCommand writes it.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for (rtype, name, key), value in values.items():
        if rtype == "broker" and name == "":
            op = ["--delete-config", key] if value is None else ["--add-config", f"{key}={value}"]
            rc, out = java(bench, "kafka.admin.ConfigCommand", ["--alter", "--entity-type", "brokers",
                                                                "--entity-default", *op])
            if rc:
                raise RuntimeError(f"ConfigCommand {' '.join(op)} failed: {out[-500:]}")
            continue
        grouped.setdefault((rtype, name), {})[key] = ("DELETE", None) if value is None else ("SET", value)
    resources = [ConfigResource(ConfigResourceType.BROKER if r == "broker" else ConfigResourceType.TOPIC, n, kv)
                 for (r, n), kv in grouped.items()]
    if not resources:
        return
    admin = KafkaAdminClient(bootstrap_servers=bench.bootstrap, client_id="someone-else")
    try:
        result = admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
    finally:
        admin.close()
    bad = [f"{t} {n}: {e}" for t, by in result.items() for n, e in by.items()
           if e is not None and getattr(e, "errno", 0) and str(e) != "NoError"]
    if bad:
        raise RuntimeError(f"someone else's config write failed: {bad}")


def throttles(bench: Bench, topics: list[str]) -> dict[str, str]:
    """Every throttle config somebody set, as ``"broker 6 key" -> "value (SOURCE)"`` (confluent-kafka)."""
    from real_kafka_checks import throttle_configs
    from real_kafka_checks import topics as existing
    live = set(existing(bench.bootstrap))
    found = throttle_configs(bench.bootstrap, bench.brokers, [t for t in topics if t in live])
    return {f"{res} {k}": f"{v} ({src})" for res, kv in found.items() for k, (v, src) in kv.items()}


def compare(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """(leftovers: keys set now that were not before, others' changed: keys set before now different)."""
    left = [f"{k}={v}" for k, v in sorted(after.items()) if k not in before]
    changed = [f"{k}: {v} -> {after.get(k, 'deleted')}" for k, v in sorted(before.items()) if after.get(k) != v]
    return left, changed


def clear_throttles(bench: Bench, topics: list[str]) -> None:
    """Delete every throttle config (between scenarios: each starts from a clean cluster)."""
    found = throttles(bench, topics)
    values: dict[SETTING, str | None] = {}
    for key, shown in found.items():
        rtype, name, k = key.split(" ")
        if "DYNAMIC_DEFAULT" in shown:
            values[("broker", "", k)] = None
        else:
            values[(rtype, name, k)] = None
    if values:
        others_set(bench, values)


# -- topics and plans ---------------------------------------------------------------------------

def fresh_topic(bench: Bench, name: str, assignment: dict[int, list[int]], sizes: dict[int, int],
                configs: dict[str, str] | None = None) -> None:
    """(Re)create ``name`` with this assignment and fill each partition with ``sizes[p]`` bytes."""
    from kafka_local.load import create_topic, fill
    delete_topic(bench, name)
    create_topic(bench.bootstrap, name, assignment, configs)
    fill(bench.bootstrap, name, sizes)


def delete_topic(bench: Bench, name: str, timeout: float = 60) -> None:
    """Delete ``name`` if it exists and wait until the metadata no longer lists it."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bench.bootstrap})
    if name not in admin.list_topics(timeout=30).topics:
        return
    admin.delete_topics([name])[name].result(timeout=30)
    deadline = time.monotonic() + timeout
    while name in admin.list_topics(timeout=30).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} still listed {timeout:.0f} s after its deletion")
        time.sleep(0.5)


def size_on_disk(bench: Bench, topic: str, partition: int, broker: int) -> int:
    """Bytes of ``topic-partition``'s log segments in ``broker``'s log dirs (read from the files)."""
    total = 0
    for d in bench.cluster.brokers[broker].log_dirs:
        pdir = Path(d) / f"{topic}-{partition}"
        if pdir.is_dir():
            total += sum(f.stat().st_size for f in pdir.glob("*.log"))
    return total


def write_plan(path: Path, topic: str, target: dict[int, list[int]]) -> Path:
    """Kafka's reassignment JSON, which both tools read."""
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in sorted(target.items())]}, indent=1))
    return path


def print_table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Columns padded to their widest cell, separated by ``|``."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, tuple("-" * w for w in widths), *rows):
        print("  " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)), flush=True)
