"""Helpers for the execute and fault tests on the real cluster: the CLI, plans, read-backs.

The tool runs as its console script (``kafka-reassign``), a separate process, as an operator
runs it. What a test asserts is read back through clients independent of the tool's admin
layer: confluent-kafka and kcat (:mod:`real_kafka_checks`), kafka-python's own admin client
for reassignments and log dirs, and Kafka's own ConfigCommand for cluster-wide defaults.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

from contextlib import contextmanager

import pytest

from real_kafka_checks import THROTTLE_BROKER_KEYS, THROTTLE_TOPIC_KEYS, describe, throttle_configs, topics

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "kafka-reassign"
T = TypeVar("T")

#: Quick polls and no produce-rate sampling (nothing is produced during these moves); the stall
#: window and the move timeout stay generous because a shared 2-core machine can be slow.
FAST = ["--poll-interval-seconds", "0.5", "--produce-sample-seconds", "0", "--stall-window-seconds", "180",
        "--batch-timeout-minutes", "5", "--print-interval", "1000"]
MB = 1_000_000


# -- the tool ---------------------------------------------------------------------------------

def write_plan(directory: Path, parts: list[dict[str, Any]], name: str = "plan.json") -> str:
    """Kafka's reassignment JSON with ``parts`` in ``directory``; its path."""
    path = directory / name
    path.write_text(json.dumps({"version": 1, "partitions": parts}))
    return str(path)


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``kafka-reassign ARGS`` to the end (stdout and stderr captured as text)."""
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=timeout)


def start_cli(*args: str) -> subprocess.Popen:
    """Start ``kafka-reassign ARGS`` in the background (a run to watch, cancel or signal)."""
    return subprocess.Popen([str(CLI), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def runs() -> Iterator[Callable[..., subprocess.Popen]]:
    """Starts ``kafka-reassign ARGS`` in the background. A run still going when the test ends (it
    failed half-way) gets SIGTERM, so it reverts its moves and restores its throttle before the
    leftover check, as an operator's Ctrl-C would."""
    started: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        started.append(start_cli(*args))
        return started[-1]

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a background run; killed if it outlives ``timeout``."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"kafka-reassign still running after {timeout:.0f} s:\n{out[-3000:]}\n{err[-3000:]}")
    return proc.returncode, out, err


def execute_args(bootstrap: str, plan: str, record_dir: Path, run_id: str, *extra: str) -> list[str]:
    """``execute`` arguments of one test run (its own record dir and run id)."""
    return ["execute", "--bootstrap-server", bootstrap, "--plan", plan, "--record-dir", str(record_dir),
            "--run-id", run_id, *FAST, *extra]


def record_of(record_dir: Path, run_id: str) -> Any:
    """The run's throttle record as the tool stored it."""
    from kafka_reassign.throttle.record import FileRecordStore
    return FileRecordStore(record_dir).get(run_id)


# -- waiting ----------------------------------------------------------------------------------

def wait_until(probe: Callable[[], T], timeout: float, what: str, every: float = 0.2,
               proc: subprocess.Popen | None = None) -> T:
    """The first truthy ``probe()`` within ``timeout`` s; fails naming ``what`` (and the run's output
    when ``proc`` ended meanwhile, since then it never will be)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"waiting for {what}: the run ended (exit {proc.returncode}):\n"
                                 f"{out[-3000:]}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(every)


# -- kafka-python's admin client (not the tool's KafkaAdmin wrapper) ----------------------------

@contextmanager
def kafka_admin(bootstrap: str) -> Iterator[Any]:
    """A plain kafka-python KafkaAdminClient."""
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="real-kafka-tests")
    try:
        yield admin
    finally:
        admin.close()


def in_flight(bootstrap: str) -> dict[tuple[str, int], list[int]]:
    """ListPartitionReassignments: (topic, partition) -> the target (replicas less those being removed)."""
    with kafka_admin(bootstrap) as admin:
        raw = admin.list_partition_reassignments()
    return {(tp.topic, tp.partition): [r for r in v["replicas"] if r not in v["removing_replicas"]]
            for tp, v in raw.items()}


def reassign(bootstrap: str, targets: Mapping[tuple[str, int], list[int] | None]) -> None:
    """Start (a replica list) or cancel (None) reassignments as another tool would."""
    from kafka.structs import TopicPartition
    with kafka_admin(bootstrap) as admin:
        errors = admin.alter_partition_reassignments(
            {TopicPartition(t, p): r for (t, p), r in targets.items()})
    bad = {k: v for k, v in errors.items() if v is not None and type(v).__name__ != "NoReassignmentInProgressError"}
    assert not bad, f"AlterPartitionReassignments failed: {bad}"


def replica_dirs(bootstrap: str, broker: int, topic: str) -> dict[tuple[int, bool], str]:
    """DescribeLogDirs of one broker: (partition, is_future) -> log dir of each replica of ``topic``."""
    with kafka_admin(bootstrap) as admin:
        resp = admin.describe_log_dirs([topic], brokers=[broker])
    out: dict[tuple[int, bool], str] = {}
    for entry in resp:
        for d in entry["log_dirs"]:
            for t in d.get("topics", []):
                if t["name"] == topic:
                    for p in t["partitions"]:
                        out[(int(p["partition_index"]), bool(p["is_future_key"]))] = d["log_dir"]
    return out


# -- configs -----------------------------------------------------------------------------------

def alter(bootstrap: str, rtype: str, name: str, values: Mapping[str, str | None]) -> None:
    """IncrementalAlterConfigs through confluent-kafka (SET, or DELETE for None): "another admin".

    Returns once the resource reads back the new values: a broker answers DescribeConfigs from
    its copy of the metadata, a moment behind the controller that committed the write.
    """
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.DELETE if v is None
                           else AlterConfigOpType.SET) for k, v in values.items()]
    res = ConfigResource(ResourceType.BROKER if rtype == "broker" else ResourceType.TOPIC, name,
                         incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([res])[res].result(timeout=60)
    source = "DYNAMIC_BROKER_CONFIG" if rtype == "broker" else "DYNAMIC_TOPIC_CONFIG"
    _wait_shown(bootstrap, [(rtype, name)], values, source)


def _wait_shown(bootstrap: str, resources: list[tuple[str, str]], values: Mapping[str, str | None],
                source: str) -> None:
    """Wait until each resource reads back ``values`` with ``source`` (None: no value of that source)."""
    def shown() -> bool:
        for rtype, name in resources:
            configs = describe(bootstrap, rtype, name)
            for key, value in values.items():
                entry = configs.get(key)
                if value is None and entry is not None and entry[1] == source:
                    return False
                if value is not None and entry != (value, source):
                    return False
        return True
    wait_until(shown, 60, f"{resources} read back {values}")


def alter_cluster_default(bootstrap: str, values: Mapping[str, str | None]) -> None:
    """IncrementalAlterConfigs of the cluster-wide broker default (the BROKER resource named ""),
    the request ``kafka-configs --entity-default`` sends, without starting a JVM (confluent-kafka
    refuses an empty broker name, kafka-python's alter_configs wants a broker id)."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
    ops = {k: (AlterConfigOp.DELETE, None) if v is None else (AlterConfigOp.SET, v) for k, v in values.items()}
    with kafka_admin(bootstrap) as admin:
        request = KafkaAdminClient._alter_configs_request([ConfigResource(ConfigResourceType.BROKER, "", ops)],
                                                          incremental=True)

        async def send() -> Any:
            return await admin._manager.send(request)
        response = admin._manager.run(send)
    errors = [(r.error_code, r.error_message) for r in response.responses if r.error_code]
    assert not errors, f"altering the cluster-wide default failed: {errors}"
    _wait_shown(bootstrap, [("broker", str(b)) for b in broker_ids(bootstrap)], values,
                "DYNAMIC_DEFAULT_BROKER_CONFIG")


def broker_ids(bootstrap: str) -> list[int]:
    """The brokers of the cluster's metadata."""
    from confluent_kafka.admin import AdminClient
    return sorted(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).brokers)


def config_command(cluster: Any, *args: str) -> str:
    """Kafka's own ``kafka-configs`` (kafka.admin.ConfigCommand) against the cluster; its stdout."""
    cmd = ["java", f"-Dlog4j2.configurationFile={cluster.directory / 'log4j2.properties'}", "-Xmx128m",
           "-cp", str(ROOT / "kafka" / "lib" / "*"), "kafka.admin.ConfigCommand",
           "--bootstrap-server", cluster.bootstrap_servers, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"ConfigCommand {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def all_topic_throttles(bootstrap: str) -> dict[str, dict[str, str | None]]:
    """The throttled-replica lists set on any topic of the cluster, in one DescribeConfigs."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics(bootstrap)]
    out: dict[str, dict[str, str | None]] = {}
    for res, future in (admin.describe_configs(resources) if resources else {}).items():
        entries = future.result(timeout=60)
        found = {k: e.value for k, e in entries.items() if k in THROTTLE_TOPIC_KEYS and not e.is_default}
        if found:
            out[res.name] = found
    return out


def everything(bootstrap: str, brokers: Mapping[int, Any]) -> dict[str, Any]:
    """Every throttle config somebody set on the brokers and on any topic, and every reassignment
    in flight: what "nothing was written" compares before and after."""
    return {"brokers": throttle_configs(bootstrap, brokers), "topics": all_topic_throttles(bootstrap),
            "in_flight": in_flight(bootstrap)}


def sourced(bootstrap: str, rtype: str, name: str, keys: tuple[str, ...]) -> dict[str, tuple[str | None, str]]:
    """The ``keys`` of one resource with their config source, as Kafka reports them."""
    configs = describe(bootstrap, rtype, name)
    return {k: configs[k] for k in keys if k in configs}


def loaded_topic(bootstrap: str, name: str, assignment: Mapping[int, list[int]], mb_each: float,
                 **fill_args: int) -> str:
    """Create ``name`` where ``assignment`` says and write ``mb_each`` MB of incompressible data per partition
    (``fill_args``: record and batch bytes, :func:`kafka_local.load.fill`)."""
    from kafka_local.load import create_topic, fill
    create_topic(bootstrap, name, assignment)
    fill(bootstrap, name, {p: int(mb_each * MB) for p in assignment}, **fill_args)
    return name
