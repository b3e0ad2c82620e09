"""kafka_throttle_reconciler after a kafka_reassign worker was killed mid-batch (SIGKILL).

1. An operator's own throttles are set (a rate on broker 4, a replica list on `clicks`).
2. `airflow dags test kafka_reassign` runs in a subprocess; once its throttle is on the brokers
   and its batch is in flight, the whole process group is killed: no teardown runs.
3. While the killed run is still "running" in the metadata DB, the reconciler leaves its
   throttle alone (it cannot tell a dead worker from a run between two batches).
4. Once the run is failed (what the scheduler does when the worker's heartbeat stops), the
   reconciler restores every config to its value before the run, marks the record restored,
   and reports - without touching - the operator's own throttles.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import pytest

from dag_runner import DagRunner, kill_group
from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.throttle.specs import FOLLOWER_REPLICAS, LEADER_RATE, ConfigChange
from sim_snapshots import dynamic_configs

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(900)]


def _wait(predicate: Callable[[], Any], timeout: float, what: str, proc: Any = None, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}:\n" + (log.read_text()[-4000:] if log else ""))
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n" + (log.read_text()[-4000:] if log else ""))


def test_reconciler_restores_throttles_of_killed_worker(tmp_path: Path, sim_cluster: Callable[..., Any],
                                                        snapshot_factory: Callable[..., dict]) -> None:
    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 40_000_000, "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 2, "rf": 2, "size_bytes": 5_000_000},
    })
    cluster = sim_cluster(snapshot, time_scale=1.0)
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        admin.alter_configs([ConfigChange("broker", "4", LEADER_RATE, None, "90000000"),
                             ConfigChange("topic", "clicks", FOLLOWER_REPLICAS, None, "1:4")])
        before = dynamic_configs(cluster)
        runner = DagRunner(tmp_path / "airflow", cluster.bootstrap_servers)

        # 40 MB at 4 MB/s: the batch takes ~10 s, long enough to kill the worker inside it.
        plan = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 2, 3]}]}
        proc = runner.start("kafka_reassign", {"plan": plan, "throttle_bytes_per_sec": 4_000_000,
                                               "poll_interval_seconds": 1, "batch_timeout_minutes": 10})
        log = runner.home / "kafka_reassign.log"
        try:
            _wait(lambda: admin.list_partition_reassignments(), 240, "the batch to be in flight", proc, log)
            throttled = dynamic_configs(cluster)
            assert throttled["broker 1"].get(LEADER_RATE) == "4000000", throttled
            assert throttled["broker 4"][LEADER_RATE] == "4000000"   # lower than the operator's: ours applies
        finally:
            kill_group(proc)                                           # the worker dies mid-batch
        assert proc.returncode is not None and proc.returncode < 0, "the run was not killed"
        assert admin.list_partition_reassignments(), "the batch finished before the kill"
        runs = runner.runs("kafka_reassign")
        run_id = runs[-1]["run_id"]
        assert runs[-1]["state"] == "running"
        assert runs[-1]["tasks"].get("throttle_remove") in (None, "none", "None", "scheduled"), runs[-1]["tasks"]

        # Kafka carries on with the move on its own; the throttle stays behind.
        _wait(lambda: not admin.list_partition_reassignments(), 120, "the orphaned move to finish")
        assert dynamic_configs(cluster)["broker 1"].get(LEADER_RATE) == "4000000"

        # The run still looks alive: its throttle may be in use, so nothing is touched.
        writes = cluster.write_count
        rc, rlog = runner.run("kafka_throttle_reconciler", {})
        assert rc == 0, rlog[-4000:]
        assert "run still active" in rlog
        assert cluster.write_count == writes
        assert dynamic_configs(cluster)["broker 1"].get(LEADER_RATE) == "4000000"

        # The scheduler fails the run of a dead worker; now the reconciler cleans up.
        runner.mark_run_failed("kafka_reassign", run_id)
        rc, rlog = runner.run("kafka_throttle_reconciler", {})
        assert rc == 0, rlog[-4000:]
        runs = runner.runs("kafka_throttle_reconciler")
        assert runs[-1]["state"] == "success" and runs[-1]["tasks"]["reconcile_throttles[0]"] == "success", runs
        after = dynamic_configs(cluster)
        assert after == before, f"not restored:\nbefore {before}\nafter  {after}"
        assert after["broker 4"][LEADER_RATE] == "90000000"            # the operator's own, untouched
        assert after["topic clicks"][FOLLOWER_REPLICAS] == "1:4"
        assert f"restored throttles of run {run_id}" in rlog
        assert "not set by this project" in rlog
        record = runner.query(f"""
import json
from kafka_reassign_airflow.record_store import VariableRecordStore
r = VariableRecordStore().get({run_id!r})
print(json.dumps(None if r is None else r.to_json()))
""")
        assert record is not None and record["restored"] is True
        assert cluster.partition_state("orders", 0)["replicas"] == [4, 2, 3]
    finally:
        admin.close()
