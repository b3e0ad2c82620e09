"""The typed, versioned payload between the Airflow tasks and the named JSON the trigger carries."""
from __future__ import annotations

import json

import pytest

from kafka_reassign.execution.outcome import OutcomeRules, StepWatch
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.planning.validate import validate_params
from kafka_reassign.run.payload import PAYLOAD_SCHEMA_VERSION, PayloadVersionError, PreparedPayload
from kafka_reassign.run.prepare import PreparedRun
from kafka_reassign.throttle.guard import EXPECTED_FIELDS, _expected_entry
from kafka_reassign.throttle.specs import ThrottleSpec


def _run(steps: list[StepMove], dry_run: bool = False) -> PreparedRun:
    plan = ReassignmentPlan.from_json({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3]},
        {"topic": "orders", "partition": 1, "replicas": [1, 2, 3]}]})
    return PreparedRun(plan=plan, params=validate_params({"dry_run": dry_run}), steps=steps,
                       throttle_spec=ThrottleSpec(rate=1000, rate_brokers={1, 4}), throttle_changes=[],
                       cluster_id="c-1", estimated_seconds=12.0)


STEP = StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100)


class _State:
    """Just what PreparedPayload.of reads from a ClusterState."""

    class _P:
        replicas = (1, 2, 3)

    def partition(self, topic: str, partition: int) -> object | None:
        return self._P() if partition == 0 else None


def test_payload_round_trips_through_plain_json():
    payload = PreparedPayload.of(_run([STEP]), _State(), started_at=1700.5)  # type: ignore[arg-type]
    wire = json.loads(json.dumps(payload.to_json()))
    assert wire["schema_version"] == PAYLOAD_SCHEMA_VERSION
    again = PreparedPayload.from_json(wire)
    assert again.before == {"orders-0": [1, 2, 3], "orders-1": None}
    assert again.started_at == 1700.5 and again.cluster_id == "c-1" and not again.dry_run
    assert again.steps == [STEP] and [m.name for m in again.moves] == ["orders-0", "orders-1"]
    assert again.to_json() == wire


def test_dry_run_and_nothing_to_move_come_from_the_prepared_run():
    dry = PreparedPayload(run=_run([], dry_run=True))
    assert dry.dry_run and dry.nothing_to_move and dry.started_at is None
    assert not PreparedPayload(run=_run([STEP])).nothing_to_move


@pytest.mark.parametrize("version", [None, 0, 2, "1", True])
def test_a_payload_of_another_version_is_refused_naming_both_versions(version):
    wire = PreparedPayload(run=_run([STEP])).to_json()
    if version is None:
        del wire["schema_version"]
    else:
        wire["schema_version"] = version
    with pytest.raises(PayloadVersionError) as err:
        PreparedPayload.from_json(wire)
    msg = str(err.value)
    assert f"reads schema_version {PAYLOAD_SCHEMA_VERSION}" in msg
    assert ("no schema_version" in msg) if version is None else (f"schema_version {version!r}" in msg)


def test_the_payload_is_one_flat_object_the_ui_reads():
    from kafka_reassign.rehearsal.report import estimate_view

    wire = PreparedPayload(run=_run([STEP])).to_json()
    assert wire["cluster_id"] == "c-1" and wire["steps"] and "schema_version" in wire
    assert estimate_view([wire]) is None  # no estimate JSON in this run; with one, the UI finds it
    est = {"source": "formula", "text": "about 12s", "seconds": 12.0}
    assert estimate_view([{**wire, "estimate": est}])["estimate"] == est


def test_the_unversioned_payload_of_the_previous_release_is_refused():
    # What prepare pushed before payloads were versioned: the PreparedRun flat, plus run keys.
    old = {**_run([STEP]).to_json(), "dry_run": False, "before": {}, "started_at": 1.0}
    with pytest.raises(PayloadVersionError, match="no schema_version"):
        PreparedPayload.from_json(old)


def test_step_watch_json_names_its_fields_and_reads_the_old_positional_list():
    w = StepWatch(submitted_at=1.0, progress_at=2.0, best_left=5, first_leader=(1.0, 10), last_leader=(2.0, 20),
                  bytes_total=9, bytes_left=5, lagging=[(4, 5)], offline=(3,))
    named = w.to_json()
    assert named["bytes_left"] == 5 and named["submitted_at"] == 1.0 and named["offline"] == [3]
    assert StepWatch.from_json(json.loads(json.dumps(named))) == w
    legacy = [1.0, 2.0, 5, None, None, [1.0, 10], [2.0, 20], 9, 5, [[4, 5]], [3]]
    assert StepWatch.from_json(legacy) == w
    assert StepWatch.from_json(legacy[:9]).lagging == []  # the oldest lists stop at bytes_left


def test_rules_and_expected_throttle_are_named_and_read_the_old_lists():
    rules = OutcomeRules(600.0, 7200.0, 1000)
    assert rules.to_json() == {"stall_window": 600.0, "step_timeout": 7200.0, "throttle_rate": 1000}
    assert OutcomeRules.from_json(rules.to_json()) == rules == OutcomeRules.from_json([600, 7200, 1000])
    entry = ("broker", "1", "leader.replication.throttled.rate", "1000")
    assert _expected_entry(dict(zip(EXPECTED_FIELDS, entry))) == entry == _expected_entry(list(entry))


def test_watch_spec_is_named_plain_json():
    from kafka_reassign.execution.executor import MoveExecutor
    from kafka_reassign.execution.limits import ExecutionLimits

    ex = MoveExecutor([STEP], ExecutionLimits(), throttle_rate=1000)
    ex.fill_frontier()  # the page of step 0 is read
    ex.watches[0] = StepWatch.start(100.0)
    spec = json.loads(json.dumps(ex.watch_spec()))
    assert spec["rules"]["throttle_rate"] == 1000
    assert spec["watch"]["0"]["submitted_at"] == 100.0 and spec["watch"]["0"]["bytes_left"] == 0
