"""kafka_reassign.units: the one bytes, rate and duration formatter and the default NIC speed."""
from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

from kafka_reassign.units import DEFAULT_NETWORK_BYTES_PER_SEC, fmt_bytes, format_duration, format_rate

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("n, text", [(0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (50_000_000, "50.0 MB"),
                                     (3.5e9, "3.5 GB"), (1.2e12, "1.2 TB"), (2e15, "2000.0 TB")])
def test_bytes_in_decimal_units(n, text):
    assert fmt_bytes(n) == text


def test_rate_is_bytes_per_second():
    assert format_rate(1_500_000) == "1.5 MB/s" and format_rate(None) == "unthrottled"


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (42.4, "42s"), (61, "1m01s"), (754, "12m34s"),
                                           (3725, "1h02m"), (math.inf, "never (stalls)"), (None, "unknown"),
                                           (math.nan, "unknown"), (-3, "0s")])
def test_durations_are_one_word(seconds, text):
    assert format_duration(seconds) == text


def test_units_import_nothing_of_the_layers_above():
    tree = ast.parse((ROOT / "include/kafka_reassign/units.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.startswith("kafka_reassign")}


def test_one_definition_of_each_formatter_and_of_the_nic_default():
    sources = [p for d in ("include/kafka_reassign", "plugins") for p in (ROOT / d).rglob("*.py")]
    defs = re.compile(r"^\s*def (fmt_bytes|fmt_seconds|format_bytes|format_duration|format_rate)\(", re.M)
    found = {(p.relative_to(ROOT).as_posix(), m) for p in sources for m in defs.findall(p.read_text("utf-8"))}
    assert found == {("include/kafka_reassign/units.py", n) for n in ("fmt_bytes", "format_duration", "format_rate")}
    nic = [p.relative_to(ROOT).as_posix() for p in sources if re.search(r"125_?000_?000", p.read_text("utf-8"))]
    assert nic == ["include/kafka_reassign/units.py"] and DEFAULT_NETWORK_BYTES_PER_SEC == 125_000_000
