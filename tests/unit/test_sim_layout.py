"""The simulator's layering: lower modules never import the ones built on them (no import cycles)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kafka_sim.apiversions import SUPPORTED
from kafka_sim.topics import valid_topic_name


def _loaded_after_import(module: str) -> set[str]:
    """kafka_sim modules a fresh interpreter has loaded after importing ``module``."""
    code = f"import sys, {module}; print(' '.join(m for m in sys.modules if m.startswith('kafka_sim')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("module, must_not_load", [
    ("kafka_sim.state", {"kafka_sim.model", "kafka_sim.replication", "kafka_sim.topics"}),
    ("kafka_sim.model_base", {"kafka_sim.state", "kafka_sim.model"}),
    ("kafka_sim.auth", {"kafka_sim.server", "kafka_sim.handlers"}),
    ("kafka_sim.apiversions", {"kafka_sim.auth", "kafka_sim.server"}),
    ("kafka_sim.configs", {"kafka_sim.config_resolution", "kafka_sim.state"}),
])
def test_lower_modules_do_not_load_the_ones_above_them(module: str, must_not_load: set[str]) -> None:
    assert not _loaded_after_import(module) & must_not_load


def test_sasl_versions_are_advertised_from_apiversions() -> None:
    from kafka_sim.auth import SASL_AUTHENTICATE, SASL_HANDSHAKE

    assert SUPPORTED[SASL_HANDSHAKE] == (1, 1)
    assert SUPPORTED[SASL_AUTHENTICATE][0] == 0


def test_connection_hook_close_is_one_object_for_server_and_auth() -> None:
    from kafka_sim import auth, connection, server

    assert server.CLOSE is connection.CLOSE is auth.CLOSE


@pytest.mark.parametrize("name, valid", [
    ("orders", True), ("a.b_c-9", True), ("x" * 249, True), ("x" * 250, False), ("", False),
    (".", False), ("..", False), ("bad name", False), ("bad/name", False),
])
def test_topic_name_rule(name: str, valid: bool) -> None:
    assert valid_topic_name(name) is valid
