"""The provider registration Airflow reads from the apache_airflow_provider entry point."""
from __future__ import annotations

import importlib
import json
from importlib.metadata import entry_points
from pathlib import Path

import jsonschema
import pytest

from kafka_reassign_airflow.get_provider_info import get_provider_info


def _import(dotted: str):
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def test_provider_info_is_valid_for_airflow_and_names_real_classes():
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    for conn in info["connection-types"]:
        hook = _import(conn["hook-class-name"])
        assert hook.conn_type == conn["connection-type"]
    for dotted in info["notifications"] + [p["plugin-class"] for p in info["plugins"]]:
        assert _import(dotted)
    assert "sensors" not in info  # the execute task's trigger watches; there is no sensor task
    for kind in ("hooks", "operators", "triggers"):
        for group in info[kind]:
            for module in group["python-modules"]:
                importlib.import_module(module)


def test_entry_points_point_at_the_provider_and_the_plugin():
    provider = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("kafka_reassign_airflow")]
    assert provider and provider[0].load() is get_provider_info
    plugin = [e for e in entry_points(group="airflow.plugins") if e.value.startswith("kafka_reassign_airflow")]
    assert plugin and plugin[0].load().name == "kafka_reassign"


@pytest.mark.parametrize("option", ["admin_retry_attempts", "kafka_client_log_level", "notify_on_failure", "work_dir"])
def test_config_options_are_documented_with_defaults(option):
    opts = get_provider_info()["config"]["kafka_reassign"]["options"]
    assert opts[option]["description"] and "default" in opts[option]


def test_airflow_loads_the_connection_form_of_kafka_reassign():
    from airflow.providers_manager import ProvidersManager

    pm = ProvidersManager()
    behaviour = pm.field_behaviours["kafka_reassign"]
    assert behaviour["relabeling"]["host"] == "Bootstrap servers"
    assert "port" in behaviour["hidden_fields"]
    assert pm.hooks["kafka_reassign"].hook_class_name.endswith("KafkaAdminHook")
    assert pm.providers["kafka-reassign"].version == "0.1.0"
