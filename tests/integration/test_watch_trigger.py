"""ReassignmentWatchTrigger.run() against the simulator: what wakes the execute task, and when."""
from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from kafka_reassign.cluster.admin import KafkaAdmin  # noqa: E402
from kafka_reassign.throttle.record import MemoryRecordStore  # noqa: E402
from sim_snapshots import make_snapshot  # noqa: E402

from kafka_reassign_airflow.triggers.reassignment import ReassignmentWatchTrigger  # noqa: E402


def _first_event(trigger: ReassignmentWatchTrigger, timeout: float) -> tuple[dict[str, Any], float]:
    async def first() -> tuple[dict[str, Any], float]:
        t0 = time.monotonic()
        async for event in trigger.run():
            return event.payload, time.monotonic() - t0
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), timeout))


def _submitted(sim_cluster: Any, monkeypatch: pytest.MonkeyPatch, size: int) -> tuple[Any, dict[str, Any]]:
    """One partition of ``size`` bytes moving 1 -> 4 under a 1 MB/s throttle, submitted: (cluster, watch spec)."""
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.run.reassign import executor_for
    from kafka_reassign.throttle.apply import apply_throttle

    cluster = sim_cluster(make_snapshot(brokers=4, topics={"t": {"partitions": 1, "rf": 3, "size_bytes": size,
                                                                 "replicas": [[1, 2, 3]]}}), time_scale=1.0)
    for k, v in airflow_env.kafka_conn_env(cluster.bootstrap_servers).items():
        monkeypatch.setenv(k, v)
    records = MemoryRecordStore()
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        prepared = prepare(admin, {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 2, 3]}]},
                           {"throttle_bytes_per_sec": 1_000_000, "produce_sample_seconds": 0})
        apply_throttle(admin, prepared, records, "r")
        ex = executor_for(prepared, "r", records)
        ex.tick(admin)
        assert ex.watches, "the step was not submitted"
        return cluster, ex.watch_spec()


@pytest.fixture
def moving(sim_cluster: Any, monkeypatch: pytest.MonkeyPatch):
    """A 200 MB move under a 1 MB/s throttle (minutes long), submitted; yields (cluster, spec)."""
    yield _submitted(sim_cluster, monkeypatch, 200_000_000)


def test_a_long_move_wakes_the_task_to_save_progress_every_refresh(moving):
    cluster, spec = moving
    trigger = ReassignmentWatchTrigger(kafka_conn_id="kafka_default", spec=spec, poll_interval=0.2, run_id="r",
                                       refresh_seconds=1.0)
    payload, waited = _first_event(trigger, timeout=30)
    # Nothing happened to the step: the wake is only for the progress the UI shows.
    assert payload["status"] == "attention" and payload["reasons"] == [], payload
    assert 1.0 <= waited < 10, waited
    (watch,) = payload["watch"].values()
    assert 0 < watch["bytes_left"] < 200_000_000, watch  # as the trigger last read them
    assert cluster.partition_state("t", 0)["adding"] == [4]  # still moving


def test_without_refresh_it_waits_for_the_step(moving):
    _, spec = moving
    trigger = ReassignmentWatchTrigger(kafka_conn_id="kafka_default", spec=spec, poll_interval=0.2, run_id="r",
                                       refresh_seconds=0)
    with pytest.raises(TimeoutError):
        _first_event(trigger, timeout=3)


@pytest.fixture
def short_move(sim_cluster: Any, monkeypatch: pytest.MonkeyPatch):
    """A 4 MB move under a 1 MB/s throttle (about 4 s), submitted; yields (cluster, spec)."""
    yield _submitted(sim_cluster, monkeypatch, 4_000_000)


def test_a_finished_step_wakes_the_task_long_before_the_poll_interval(short_move):
    cluster, spec = short_move
    # The step's lanes: leader 1's outbound throttle (~1) and broker 4's inbound one.
    assert spec["wake"]["rate"] == 1_000_000 and spec["wake"]["brokers"] == {next(iter(spec["steps"])): [~1, 4]}
    listings_before = sum(n for (api, _), n in cluster.request_counts.items() if api == 46)
    trigger = ReassignmentWatchTrigger(kafka_conn_id="kafka_default", spec=spec, poll_interval=60, run_id="r",
                                       refresh_seconds=0)
    payload, waited = _first_event(trigger, timeout=30)
    (reason,) = payload["reasons"]
    assert "t-0" in reason and cluster.partition_state("t", 0)["adding"] == [], payload
    # Due at about 4 s; cheap checks from then on, at most one a second: the wake comes within
    # a few seconds of the copy's end, not after the 60 s poll interval.
    assert 3.0 <= waited < 12, waited
    listings = sum(n for (api, _), n in cluster.request_counts.items() if api == 46) - listings_before
    assert 1 <= listings <= waited + 2, (listings, waited)
