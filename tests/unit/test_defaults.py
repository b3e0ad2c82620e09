"""One set of run defaults: the CLI, the DAG params and ReassignParams agree with kafka_reassign.defaults."""
from __future__ import annotations

import pytest

from kafka_reassign import defaults
from kafka_reassign.cli import main as cli
from kafka_reassign.units import format_rate, parse_rate
from kafka_reassign.planning.validate import ReassignParams, validate_params


def _cli_execute_defaults() -> dict:
    args = cli.build_parser().parse_args(["execute", "--bootstrap-server", "localhost:9092", "--plan", "p.json"])
    return cli._params(args)


def _dag_defaults() -> dict:
    from kafka_reassign_airflow.params import reassign_params, run_options

    return run_options({name: param.value for name, param in reassign_params().items()})


def test_cli_and_dag_defaults_are_equal_and_come_from_defaults_module():
    cli_d, dag_d = _cli_execute_defaults(), _dag_defaults()
    assert cli_d == dag_d
    assert validate_params(cli_d) == validate_params(dag_d) == ReassignParams()
    assert ReassignParams().to_json() == defaults.RUN_DEFAULTS


def test_defaults_are_cruise_control_s_executor_defaults_but_per_broker():
    assert (defaults.MAX_PARTITION_MOVEMENTS, defaults.MAX_LEADER_MOVEMENTS,
            defaults.POLL_INTERVAL_SECONDS) == (1250, 1000, 10.0)
    # Not Cruise Control's 5: at 5 moves per broker a 60-broker rebalance used ~75% of the
    # throttle (benchmarks/rehearsal.py prints the ratio per setting).
    assert defaults.MAX_MOVEMENTS_PER_BROKER == 20


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
    assert cli._params(args)["throttle_bytes_per_sec"] == 20_000_000
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
            "batch_timeout_minutes", "poll_interval_seconds", "stall_window_minutes"} <= set(shown)
    assert shown == {name: params[name].value for name in shown}
