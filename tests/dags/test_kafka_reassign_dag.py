"""DagBag integrity of dags/: imports cleanly, params as the README names them, safe wiring."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import airflow_env

pytestmark = [pytest.mark.airflow]

DOCUMENTED_PARAMS = {"kafka_conn_id", "plan", "goal", "brokers", "replication_factor", "throttle_bytes_per_sec",
                 "max_partition_movements", "max_movements_per_broker", "dry_run", "cancel_on_failure",
                 "batch_timeout_minutes"}


@pytest.fixture(scope="module")
def bag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(str(airflow_env.DAGS_FOLDER))


@pytest.fixture(scope="module")
def dag(bag):
    d = bag.get_dag("kafka_reassign")
    assert d is not None, bag.import_errors
    return d


def test_no_import_errors(bag):
    assert bag.import_errors == {}
    assert "kafka_reassign" in bag.dag_ids


def test_params_match_the_readme_and_render_in_the_form(dag):
    params = dag.params
    assert DOCUMENTED_PARAMS <= set(params.keys())
    for name in params.keys():
        p = params.get_param(name)
        assert p.description and len(p.description) > 20, name
        assert "type" in p.schema, name
    assert params["kafka_conn_id"] == "kafka_default"
    assert params["plan"] is None and params["goal"] is None
    assert params["dry_run"] is False and params["cancel_on_failure"] is True
    assert params.get_param("plan").schema["type"] == ["object", "null"]
    assert params.get_param("throttle_bytes_per_sec").schema["type"] == "integer"
    assert "rebalance" in params.get_param("goal").schema["enum"]


def test_param_schema_rejects_wrong_types(dag):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    for bad in ({"throttle_bytes_per_sec": "fast"}, {"max_partition_movements": 0},
                {"goal": "shuffle"}, {"plan": [1, 2]}, {"batch_timeout_minutes": -1},
                {"brokers": [1, 1]}, {"dry_run": "maybe"}, {"movement_strategy": "random"},
                {"movement_strategy": "largest-first,"}):
        d = ParamsDict({k: dag.params.get_param(k) for k in dag.params.keys()})
        with pytest.raises(ParamValidationError):
            d.update(bad)
            d.validate()


def test_wiring_teardown_and_sequencing(dag):
    t = dag.task_dict
    remove = t["throttle_remove"]
    assert remove.is_teardown and remove.on_failure_fail_dagrun
    assert {"prepare", "throttle_set"} <= remove.upstream_task_ids
    assert t["prepare"].is_setup and t["throttle_set"].is_setup
    assert "cancel_on_failure" in remove.upstream_task_ids  # cancel before the throttle goes
    assert str(t["cancel_on_failure"].trigger_rule) in ("one_failed", "TriggerRule.ONE_FAILED")
    # The report (not the teardown) decides the run state, and needs execute to succeed.
    assert {"execute", "throttle_remove"} <= t["report"].upstream_task_ids
    assert [x.task_id for x in dag.tasks if not x.downstream_list] == ["report"]
    # One task instance per task whatever the plan's size: nothing is mapped.
    assert len(dag.tasks) == 8
    assert not any(getattr(x, "_is_mapped", False) or type(x).__name__ == "MappedOperator" for x in dag.tasks)
    assert t["execute"].upstream_task_ids == {"throttle_set"} and t["execute"].deferrable
    # Infrastructure failures (Airflow's deferral race, a lost worker) are retried and resume.
    assert t["execute"].retries >= 1
    assert "spark-submit" in dag.doc_md.lower() or "SparkSubmitOperator" in dag.doc_md
    assert dag.max_active_runs == 16  # fleet-wide; the cluster lock keeps one run per cluster
    assert dag.render_template_as_native_obj
    assert "curl" in dag.doc_md and "/api/v2/dags/kafka_reassign/dagRuns" in dag.doc_md


def test_planning_is_one_path_through_spark_submit(bag, dag):
    """snapshot >> plan (spark-submit of planner/spark_job.py) >> prepare, in both DAGs."""
    from kafka_reassign_airflow.operators.planning import ClusterSnapshotOperator, PlannerSubmitOperator

    rebalance = bag.get_dag("kafka_rebalance")
    assert rebalance is not None, bag.import_errors
    # The rebalance's goal is fixed: params of other goals would do nothing there.
    assert not {"goal", "brokers", "disk_threshold_percent"} & set(rebalance.params)
    assert "disk_threshold_percent" in dag.params
    for d in (dag, rebalance):
        t = d.task_dict
        snap, plan, prepare = t["snapshot"], t["plan"], t["prepare"]
        assert type(snap) is ClusterSnapshotOperator and type(plan) is PlannerSubmitOperator
        assert "spark_conn_id" in plan.template_fields and "timeout_seconds" in plan.template_fields
        assert plan.execution_timeout is not None  # the planning task never hangs
        assert plan.upstream_task_ids == {"snapshot"}
        assert "plan" in prepare.upstream_task_ids and prepare.plan_task_id == "plan"
        # prepare runs when the planning tasks were skipped (a plan was given), not after a failure
        assert str(prepare.trigger_rule).split(".")[-1].lower().startswith("none_failed"), prepare.trigger_rule
        assert d.params["spark_conn_id"] == "spark_default"
        # the operator's log dir capacities reach the snapshot the planner reads
        assert d.params["log_dir_capacity_bytes"] == [] and "log_dir_capacity_bytes" in snap.template_fields
        assert snap.log_dir_capacity_bytes == "{{ params.get('log_dir_capacity_bytes') }}"
    assert str(dag.task_dict["prepare"].trigger_rule).split(".")[-1].lower() == "none_failed"
    t = dag.task_dict
    assert t["snapshot"].plan == "{{ params.plan }}" and t["plan"].spark_conn_id == "{{ params.spark_conn_id }}"
    r = rebalance.task_dict
    assert r["snapshot"].plan is None and r["snapshot"].goal == "rebalance"
    assert r["plan"].engine == "{{ params.planner_engine }}"
    assert {"plan"} <= r["should_rebalance"].upstream_task_ids
    assert not any(tid in r for tid in ("plan_rebalance",))
    # The planning options are not run options of the domain layer.
    from kafka_reassign_airflow.params import run_options

    assert "spark_conn_id" not in run_options({"spark_conn_id": "spark_default", "dry_run": True})


def test_planner_args_and_planning_dir(monkeypatch, tmp_path):
    from kafka_reassign_airflow.operators.planning import PlannerSubmitOperator, planning_dir

    op = PlannerSubmitOperator(task_id="plan_x", goal="add-brokers", brokers=[4, 5], replication_factor=None,
                               limits={"throttle_bytes_per_sec": 20_000_000, "max_partition_movements": 10,
                                       "log_dir_throttle_bytes_per_sec": None},
                               planner_options={"exclude_topics": ["audit"]})
    args = op.planner_args("/w/snapshot.json", "/w/PLAN.json")
    assert args[:6] == ["--snapshot", "/w/snapshot.json", "--goal", "add-brokers", "--out", "/w/PLAN.json"]
    assert args[args.index("--brokers") + 1] == "4,5" and "--replication-factor" not in args
    assert args[args.index("--throttle") + 1] == "20000000" and "--log-dir-throttle" not in args
    assert json.loads(args[args.index("--options") + 1]) == {"exclude_topics": ["audit"]}
    assert float(args[args.index("--timeout") + 1]) == op.timeout_seconds
    assert all(isinstance(a, str) for a in args)
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__WORK_DIR", str(tmp_path))
    d = planning_dir("kafka_reassign", "manual__2026-01-01T00:00:00+00:00")
    assert d.parent == tmp_path / "kafka_reassign" and "/" not in d.name and ":" not in d.name


def test_trigger_serializes_to_plain_json_and_imports_from_the_package():
    from kafka_reassign.execution.executor import MoveExecutor
    from kafka_reassign.execution.limits import ExecutionLimits
    from kafka_reassign.execution.outcome import StepWatch
    from kafka_reassign.execution.steps import StepMove

    from kafka_reassign_airflow.triggers.reassignment import ReassignmentWatchTrigger

    ex = MoveExecutor([StepMove("t", 0, (1, 2), (3, 1), size_bytes=10)], ExecutionLimits(), throttle_rate=1000)
    ex.fill_frontier()  # the page of step 0 is read
    ex.watches[0] = StepWatch.start(100.0)  # as if submitted
    trig = ReassignmentWatchTrigger(kafka_conn_id="kafka_default", spec=ex.watch_spec(), poll_interval=1.5,
                                    run_id="r")
    path, kwargs = trig.serialize()
    assert path == "kafka_reassign_airflow.triggers.reassignment.ReassignmentWatchTrigger"
    assert kwargs["spec"]["steps"]["0"]["target"] == [3, 1]
    assert json.loads(json.dumps(kwargs)) == kwargs
    assert not any("password" in k or "sasl" in k for k in kwargs)
    import importlib

    mod, cls = path.rsplit(".", 1)
    again = getattr(importlib.import_module(mod), cls)(**kwargs)
    assert again.serialize() == (path, kwargs)


def test_dag_file_parses_without_kafka_or_spark_imports():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('d', {str(airflow_env.DAGS_FOLDER / 'kafka_reassign_dag.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "heavy = [k for k in ('kafka', 'confluent_kafka', 'pyspark', 'kafka_reassign.cluster.admin', 'kafka_sim') if k in sys.modules]\n"
        "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_hook_maps_librdkafka_security_settings_without_leaking_secrets(tmp_path):
    from kafka_reassign_airflow.hooks.kafka_admin import librdkafka_to_kafka_python, redacted

    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    kw = librdkafka_to_kafka_python({
        "bootstrap.servers": "b1:9093, b2:9093", "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "ops", "sasl.password": "s3cret",
        "ssl.ca.location": str(ca), "ssl.key.password": "k3y",
        "ssl.endpoint.identification.algorithm": "none", "group.id": "ignored"})
    assert kw == {"bootstrap_servers": ["b1:9093", "b2:9093"], "security_protocol": "SASL_SSL",
                  "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "ops",
                  "sasl_plain_password": "s3cret", "ssl_cafile": str(ca), "ssl_password": "k3y",
                  "ssl_check_hostname": False}
    shown = json.dumps(redacted(kw))
    assert "s3cret" not in shown and "k3y" not in shown
    with pytest.raises(ValueError, match="bootstrap.servers"):
        librdkafka_to_kafka_python({"security.protocol": "SSL"})
    with pytest.raises(ValueError, match="security.protocol"):
        librdkafka_to_kafka_python({"bootstrap.servers": "b:1", "security.protocol": "TLS"})