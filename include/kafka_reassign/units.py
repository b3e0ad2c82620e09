"""Sizes, rates and durations: read as operators write them (``50MB/s``, ``10MiB/s``,
``50000000``) and printed one way everywhere (CLI, dry run, rehearsal, planner, UI).

Decimal prefixes (kB, MB, GB) are powers of 1000 and binary ones (KiB, MiB, GiB) powers of
1024, as kafka-reassign-partitions.sh's ``--throttle`` is in bytes/s and Kafka's docs write
rates in MB/s. Printed sizes and rates use decimal units, the way Kafka's own tools and
dashboards do. Also the broker network capacity assumed where a snapshot does not say. This
module imports nothing of kafka_reassign: every layer may use it.
"""
from __future__ import annotations

import math
import re
from typing import Iterable

#: Network capacity assumed per broker when the snapshot does not say (1 Gbit/s).
DEFAULT_NETWORK_BYTES_PER_SEC = 125_000_000.0

_MULTIPLIERS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2, "gi": 1024**3, "gib": 1024**3,
    "ti": 1024**4, "tib": 1024**4,
}
_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*(?:/\s*s(?:ec)?)?\s*$")


def parse_bytes(text: str, *, what: str = "size") -> int:
    """Bytes from ``"500MB"``, ``"2GiB"`` or ``"1048576"`` (a trailing ``/s`` is accepted for rates).

    :param text: the value as typed
    :param what: what the value is, for the error message
    :raises ValueError: naming the value and the accepted forms
    """
    m = _RATE_RE.match(str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _MULTIPLIERS:
        raise ValueError(f"{what} {text!r} is not understood: write bytes (50000000) or a unit "
                         "such as 50MB/s, 10MiB/s, 1GB/s")
    return int(round(float(m.group(1)) * _MULTIPLIERS[unit]))


def parse_rate(text: str) -> int:
    """Bytes per second from ``"50MB/s"``, ``"10MiB/s"`` or ``"50000000"``.

    :param text: the rate as typed
    :raises ValueError: naming the value and the accepted forms
    """
    return parse_bytes(text, what="rate")


def rate_argument(text: str) -> int:
    """:func:`parse_rate` as an argparse ``type=`` (a bad rate is a usage error, exit 2)."""
    import argparse

    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fmt_bytes(n: float) -> str:
    """Decimal units: ``999 B``, ``1.0 KB``, ``50.0 MB``, ``3.5 GB``.

    :param n: bytes (Kafka throttles are talked about in decimal units: 1 MB/s = 1e6 B/s)
    """
    n = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def format_rate(bytes_per_sec: float | None) -> str:
    """``50.0 MB/s``; ``unthrottled`` for None."""
    return "unthrottled" if bytes_per_sec is None else f"{fmt_bytes(bytes_per_sec)}/s"


def format_duration(seconds: float | None) -> str:
    """``45s``, ``12m05s``, ``3h20m``; ``never (stalls)`` for inf, ``unknown`` for None.

    No spaces inside, so a duration stays one word in a sentence or a log line.
    """
    if seconds is None or math.isnan(seconds):
        return "unknown"
    if math.isinf(seconds):
        return "never (stalls)"
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def fmt_ids(ids: Iterable[int]) -> str:
    """Broker ids as Kafka's tools print a replica list: ``[1,2,3]``."""
    return "[" + ",".join(str(i) for i in ids) + "]"
