"""The DAG files with a fleet configured (Variable kafka_reassign_fleet): one rebalance DAG per
cluster with its own schedule, the reconciler over every cluster, bad fleets as import errors."""
from __future__ import annotations

import json
from typing import Any

import pytest

import airflow_env

pytestmark = [pytest.mark.airflow]

REBALANCE_FILE = "kafka_rebalance.py"
RECONCILER_FILE = "kafka_throttle_reconciler.py"
THREE = [{"conn_id": "kafka_eu1", "schedule": "0 2 * * *", "balance_threshold": 1.2},
         {"conn_id": "kafka_us1", "schedule": "30 4 * * 1", "throttle_bytes_per_sec": 5_000_000,
          "require_approval": True, "maintenance_windows": ["Mon 04:30-08:00 UTC"],
          "balance_goals": ["rack-aware", "capacity", "disk", "leader-bytes-in", "leader-count"]},
         {"conn_id": "kafka_ap1"}]


@pytest.fixture
def fleet_env(airflow_db: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set the fleet Variable and Kafka connections (through the environment) for one test."""
    # kafka_eu1_alias is a second connection to kafka_eu1's brokers: the same cluster.
    servers = {"kafka_eu1": "eu1:9092", "kafka_us1": "us1:9092", "kafka_ap1": "ap1:9092", "kafka_eu1_alias": "eu1:9092"}
    for conn_id, bootstrap in servers.items():
        for key, value in airflow_env.kafka_conn_env(bootstrap, conn_id).items():
            monkeypatch.setenv(key, value)

    def set_fleet(entries: object) -> None:
        monkeypatch.setenv("AIRFLOW_VAR_KAFKA_REASSIGN_FLEET", json.dumps(entries))

    return set_fleet


def _bag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(str(airflow_env.DAGS_FOLDER))


def _schedule(dag: Any) -> str | None:
    return getattr(dag.timetable, "expression", None) or getattr(dag.timetable, "_expression", None)


def test_three_clusters_give_three_rebalance_dags_with_their_own_schedules(fleet_env: Any) -> None:
    fleet_env(THREE)
    bag = _bag()
    assert bag.import_errors == {}
    rebalance = sorted(d for d in bag.dag_ids if d.startswith("kafka_rebalance"))
    assert rebalance == ["kafka_rebalance__kafka_ap1", "kafka_rebalance__kafka_eu1", "kafka_rebalance__kafka_us1"]
    eu1, us1, ap1 = (bag.get_dag(f"kafka_rebalance__{c}") for c in ("kafka_eu1", "kafka_us1", "kafka_ap1"))
    assert _schedule(eu1) == "0 2 * * *" and _schedule(us1) == "30 4 * * 1"
    assert _schedule(ap1) == "0 0 * * *"  # no schedule of its own: [kafka_reassign] rebalance_schedule (@daily)
    assert eu1.params["kafka_conn_id"] == "kafka_eu1" and eu1.params["balance_threshold"] == 1.2
    assert eu1.params.get_param("kafka_conn_id").schema["enum"] == ["kafka_eu1"]
    assert us1.params["throttle_bytes_per_sec"] == 5_000_000 and us1.params["require_approval"] is True
    assert ap1.params["balance_threshold"] == 1.10 and ap1.params["require_approval"] is False
    assert us1.params["maintenance_windows"] == ["Mon 04:30-08:00 UTC"] and ap1.params["maintenance_windows"] == []
    assert us1.params["balance_goals"] == ["rack-aware", "capacity", "disk", "leader-bytes-in", "leader-count"]
    assert ap1.params["balance_goals"] == ["rack-aware", "capacity", "network-capacity",  # the default
                                           "replica-capacity", "disk", "network-in", "topic-spread",
                                           "leader-count", "leader-bytes-in", "network-out"]
    assert us1.task_dict["plan"].limits["balance_goals"] == "{{ params.get('balance_goals') }}"
    for dag in (eu1, us1, ap1):
        assert dag.task_dict["plan"].pool == "kafka_reassign_planning"
        assert dag.task_dict["prepare"].options["kafka_conn_id"] == "{{ params.kafka_conn_id }}"
        assert "One DAG per cluster" in dag.doc_md or "one DAG per" in dag.doc_md
    reconciler = bag.get_dag("kafka_throttle_reconciler")
    assert reconciler.params["kafka_conn_ids"] == ["kafka_eu1", "kafka_us1", "kafka_ap1"]
    assert set(reconciler.params["throttling_dag_ids"]) == {"kafka_reassign", *rebalance}
    assert bag.get_dag("kafka_reassign").max_active_runs == 16


@pytest.mark.parametrize(("entries", "named"), [
    ([*THREE, {"conn_id": "kafka_nowhere"}], "fleet entry 4 (kafka_nowhere): unknown connection 'kafka_nowhere'"),
    ([*THREE, {"conn_id": "kafka_us1", "balance_threshold": 1.5}],
     "fleet entry 4 (kafka_us1): the same cluster as fleet entry 2 (kafka_us1)"),
    ([*THREE, "kafka_eu1_alias"], "fleet entry 4 (kafka_eu1_alias): the same cluster as fleet entry 1 (kafka_eu1)"),
    ([{"conn_id": "kafka_eu1", "schedule": "0 25 * * *"}], "fleet entry 1 (kafka_eu1): invalid schedule '0 25 * * *'"),
])
def test_a_bad_fleet_is_an_import_error_naming_the_entry(fleet_env: Any, entries: object, named: str) -> None:
    fleet_env(entries)
    bag = _bag()
    errors = {path.rsplit("/", 1)[-1]: text for path, text in bag.import_errors.items()}
    assert set(errors) == {REBALANCE_FILE, RECONCILER_FILE}, bag.import_errors
    for text in errors.values():
        assert "Variable kafka_reassign_fleet has 1 problem(s)" in text and named in text, text
    assert not any(d.startswith("kafka_rebalance") for d in bag.dag_ids)
    assert "kafka_reassign" in bag.dag_ids  # manual reassignments are not held up by a bad fleet


def test_no_fleet_is_the_single_cluster_of_before(airflow_db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_VAR_KAFKA_REASSIGN_FLEET", raising=False)
    bag = _bag()
    assert bag.import_errors == {}
    assert sorted(d for d in bag.dag_ids if d.startswith("kafka_rebalance")) == ["kafka_rebalance"]
    assert bag.get_dag("kafka_rebalance").params["kafka_conn_id"] == "kafka_default"
    assert bag.get_dag("kafka_throttle_reconciler").params["kafka_conn_ids"] == ["kafka_default"]


def test_max_active_runs_comes_from_config(airflow_db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__MAX_ACTIVE_RUNS", "40")
    assert _bag().get_dag("kafka_reassign").max_active_runs == 40


def test_the_planning_pool_is_created_when_missing_and_never_resized(
        airflow_db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.models.pool import Pool

    from kafka_reassign_airflow.fleet import ensure_planning_pool, ensure_planning_pool_quietly

    name = f"kafka_reassign_planning_test_{id(monkeypatch)}"
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__PLANNING_POOL", name)
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__PLANNING_POOL_SLOTS", "3")
    assert Pool.get_pool(name) is None
    ensure_planning_pool_quietly()  # what the plugin does when the api-server loads it
    assert Pool.get_pool(name).slots == 3
    Pool.create_or_update_pool(name=name, slots=9, description="sized by the operator", include_deferred=False)
    assert ensure_planning_pool() is False and Pool.get_pool(name).slots == 9
    assert _bag().get_dag("kafka_reassign").task_dict["plan"].pool == name


def test_config_examples_and_defaults_are_strings() -> None:
    """Airflow writes them into a new airflow.cfg; anything but a string breaks the airflow CLI."""
    from kafka_reassign_airflow.get_provider_info import CONFIG_OPTIONS

    for name, option in CONFIG_OPTIONS.items():
        assert all(option[k] is None or isinstance(option[k], str) for k in ("example", "default")), name


def test_the_progress_page_finds_a_fleet_run_s_cluster_from_its_dag_id() -> None:
    from kafka_reassign_airflow.fleet import fleet_conn_id

    assert fleet_conn_id("kafka_rebalance__kafka_eu1") == "kafka_eu1"
    assert fleet_conn_id("kafka_rebalance") is None and fleet_conn_id("kafka_reassign") is None
    assert fleet_conn_id("kafka_rebalance__") is None


def test_the_progress_page_lists_runs_of_the_fleet_rebalance_dags(airflow_db: Any) -> None:
    import time

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    from kafka_reassign_airflow.plugin import _recent_runs

    run_id = f"scheduled__fleet-{time.time_ns()}"
    with create_session() as session:
        session.add(DagRun(dag_id="kafka_rebalance__kafka_eu1", run_id=run_id, run_type=DagRunType.SCHEDULED,
                           state=DagRunState.RUNNING, triggered_by=DagRunTriggeredByType.TEST))
    assert {"dag_id": "kafka_rebalance__kafka_eu1", "run_id": run_id, "state": "running"} in _recent_runs()
