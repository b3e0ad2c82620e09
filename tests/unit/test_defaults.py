"""One table of run parameters (kafka_reassign.defaults.RUN_PARAMS): the CLI, the DAG params,
ReassignParams, the executor's limits, the planner's flags and the README agree with it."""
from __future__ import annotations

import pytest

from kafka_reassign import defaults
from kafka_reassign.cli import main as cli
from kafka_reassign.units import format_rate, parse_rate
from kafka_reassign.planning.validate import ReassignParams, validate_params


def _cli_execute_defaults() -> dict:
    args = cli.build_parser().parse_args(["execute", "--bootstrap-server", "localhost:9092", "--plan", "p.json"])
    return defaults.run_values_from_args(args)


def _dag_defaults() -> dict:
    from kafka_reassign_airflow.params import reassign_params, run_options

    return run_options({name: param.value for name, param in reassign_params().items()})


def test_cli_and_dag_defaults_are_equal_and_come_from_defaults_module():
    cli_d, dag_d = _cli_execute_defaults(), _dag_defaults()
    assert cli_d == dag_d
    assert validate_params(cli_d) == validate_params(dag_d) == ReassignParams()
    # to_json is plain JSON: the (empty) tuple of maintenance windows is a list there.
    assert ReassignParams().to_json() == {k: list(v) if isinstance(v, tuple) else v
                                          for k, v in defaults.RUN_DEFAULTS.items()}


def test_defaults_are_cruise_control_s_executor_defaults_but_per_broker():
    assert (defaults.MAX_PARTITION_MOVEMENTS, defaults.MAX_LEADER_MOVEMENTS,
            defaults.POLL_INTERVAL_SECONDS) == (1250, 1000, 10.0)
    # Not Cruise Control's 5: a ceiling above the byte budget that decides how much a broker has in
    # flight, so many small moves keep the throttle busy (benchmarks/executor.py prints the ratio).
    assert defaults.MAX_MOVEMENTS_PER_BROKER == 100


@pytest.mark.parametrize("text, expected", [
    ("50000000", 50_000_000), ("50MB/s", 50_000_000), ("50 MB/s", 50_000_000), ("10MiB/s", 10 * 1024**2),
    ("1.5GB/s", 1_500_000_000), ("512KiB", 512 * 1024), ("100kB/sec", 100_000),
])
def test_rates_in_human_units(text, expected):
    assert parse_rate(text) == expected


@pytest.mark.parametrize("text", ["fast", "50 MB/h", "-5MB/s", "", "5XB"])
def test_bad_rate_names_the_value_and_the_accepted_forms(text):
    with pytest.raises(ValueError, match=r"rate .* is not understood: write bytes \(50000000\) or a unit"):
        parse_rate(text)


def test_rates_printed_in_decimal_units():
    assert format_rate(50_000_000) == "50.0 MB/s"
    assert format_rate(None) == "unthrottled"


def test_cli_accepts_a_human_throttle_and_rejects_a_bad_one(capsys):
    args = cli.build_parser().parse_args(["execute", "--bootstrap-server", "h:1", "--plan", "p", "--throttle", "20MB/s"])
    assert defaults.run_values_from_args(args)["throttle_bytes_per_sec"] == 20_000_000
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(["execute", "--bootstrap-server", "h:1", "--plan", "p", "--throttle", "fast"])
    assert exc.value.code == 2
    assert "rate 'fast' is not understood" in capsys.readouterr().err


def test_documented_param_tables_show_the_dag_defaults():
    import json
    import re
    from pathlib import Path

    from kafka_reassign_airflow.params import reassign_params

    params = reassign_params()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "DAGS.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", doc, flags=re.M)
    def value_of(text: str):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text  # a bare string such as kafka_default

    shown = {name: value_of(value) for name, value in rows if name in params}
    assert {"throttle_bytes_per_sec", "max_partition_movements", "max_leader_movements",
            "move_timeout_minutes", "poll_interval_seconds", "stall_window_minutes"} <= set(shown)
    assert shown == {name: params[name].value for name in shown}


def test_readme_defaults_table_is_the_generated_one():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert defaults.readme_defaults_table() in readme, (
        "README.md's defaults table differs from kafka_reassign.defaults.readme_defaults_table(): paste its output")


def test_reassign_params_has_one_field_per_row_with_its_type_and_default():
    import dataclasses

    fields = dataclasses.fields(ReassignParams)
    assert [f.name for f in fields] == [p.name for p in defaults.RUN_PARAMS] or \
        {f.name for f in fields} == set(defaults.PARAMS_BY_NAME)
    for f in fields:
        row = defaults.PARAMS_BY_NAME[f.name]
        assert f.default == row.default, f.name
        assert row.kind.__name__ in str(f.type), (f.name, f.type)
        assert ("None" in str(f.type)) == row.nullable, f.name


def test_execution_limits_default_to_the_table():
    from kafka_reassign.execution.limits import ExecutionLimits

    assert ExecutionLimits.from_params(ReassignParams()) == ExecutionLimits()


def test_old_name_batch_timeout_minutes_is_accepted_and_giving_both_is_refused():
    from kafka_reassign.errors import ParamError
    from kafka_reassign_airflow.params import reassign_params, run_options

    assert validate_params({"batch_timeout_minutes": 7}).move_timeout_minutes == 7.0
    with pytest.raises(ParamError, match="batch_timeout_minutes is the old name of move_timeout_minutes"):
        validate_params({"batch_timeout_minutes": 7, "move_timeout_minutes": 8})
    with pytest.raises(ParamError, match="batch_timeout_minutes: must be a number > 0"):
        validate_params({"batch_timeout_minutes": 0})
    parse = cli.build_parser().parse_args
    base = ["execute", "--bootstrap-server", "h:1", "--plan", "p"]
    assert validate_params(defaults.run_values_from_args(parse([*base, "--batch-timeout-minutes", "7"]))) == \
        validate_params(defaults.run_values_from_args(parse([*base, "--move-timeout-minutes", "7"])))
    with pytest.raises(ParamError, match="not both"):
        validate_params(defaults.run_values_from_args(
            parse([*base, "--batch-timeout-minutes", "7", "--move-timeout-minutes", "8"])))
    dag = {name: param.value for name, param in reassign_params().items()}
    assert validate_params(run_options({**dag, "batch_timeout_minutes": 7})).move_timeout_minutes == 7.0
    with pytest.raises(ParamError, match="not both"):
        validate_params(run_options({**dag, "batch_timeout_minutes": 7, "move_timeout_minutes": 8}))


def test_replication_factor_goal_implies_allow_rf_change():
    from kafka_reassign_airflow.params import run_options

    assert run_options({"dry_run": True}, goal="replication-factor")["allow_rf_change"] is True
    assert run_options({"goal": "replication-factor"})["allow_rf_change"] is True
    assert "allow_rf_change" not in run_options({"goal": "rebalance"})


def test_planner_flags_and_cli_flags_come_from_the_table():
    flags = defaults.planner_flags({"throttle_bytes_per_sec": 1_000_000, "log_dir_throttle_bytes_per_sec": None,
                                    "max_leader_movements": 3, "dry_run": True})
    assert flags == ["--throttle", "1000000", "--max-leader-movements", "3"]
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices  # type: ignore[attr-defined]
    execute_flags = {o for a in sub["execute"]._actions for o in a.option_strings}
    snapshot_flags = {o for a in sub["snapshot"]._actions for o in a.option_strings}
    for row in defaults.RUN_PARAMS:
        # a planning input (log dir capacities) is the snapshot's flag, not the run's
        assert row.cli is None or row.cli.flag in (snapshot_flags if row.cli.snapshot_only else execute_flags), \
            row.name
        assert row.cli is None or not row.cli.snapshot_only or row.cli.flag not in execute_flags, row.name
    rehearse_flags = {o for a in sub["rehearse"]._actions for o in a.option_strings}
    assert "--dry-run" not in rehearse_flags and "--throttle" in rehearse_flags


def test_dag_params_schema_comes_from_the_table():
    from kafka_reassign_airflow.params import reassign_params

    params = reassign_params()
    assert params["throttle_bytes_per_sec"].schema["minimum"] == defaults.MIN_THROTTLE_BYTES_PER_SEC
    assert params["stall_window_minutes"].value == defaults.STALL_WINDOW_SECONDS / 60
    assert params["move_timeout_minutes"].schema["exclusiveMinimum"] == 0
    assert params["batch_timeout_minutes"].value is None


def test_trigger_conf_check_names_both_names_and_knows_the_domain_names():
    from kafka_reassign_airflow.conf_check import conf_problems
    from kafka_reassign_airflow.params import reassign_params

    dag = {name: param.value for name, param in reassign_params().items()}
    both = conf_problems("kafka_reassign", dag, {"goal": "rebalance", "batch_timeout_minutes": 3,
                                                 "move_timeout_minutes": 4})
    assert both == ["'batch_timeout_minutes' is the old name of 'move_timeout_minutes': give one of them, not both"]
    assert conf_problems("kafka_reassign", dag, {"goal": "rebalance", "batch_timeout_minutes": 3}) == []
    hint = conf_problems("kafka_reassign", dag, {"goal": "rebalance", "stall_window_seconds": 60})
    assert "did you mean 'stall_window_minutes'" in hint[0]
