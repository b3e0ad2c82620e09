"""The planner's input file: a snapshot as JSON lines, which Spark reads directly.

Line 1 is a header object: ``{"snapshot_lines": 1, "version": 1, "brokers": [...], "topics":
[{"name", "configs"}]}`` (brokers as in the snapshot format, topics without partitions). Every
further line is one partition::

    {"topic": "orders", "partition": 5, "replicas": [3, 1, 2], "log_dirs": ["any", ...],
     "size_bytes": 123, "bytes_in_per_sec": 4.5, "leader": 3}

(``remote_bytes`` only on partitions of tiered topics: bytes a move leaves in remote storage;
``consumer_bytes_per_sec`` only where the snapshot measured what consumers read.)

Only the header is read on the driver (brokers + topics: small). The partition lines are read by
Spark (``spark.read.json`` with a fixed schema; the header line has no ``topic`` and is dropped),
so the driver never holds one object per replica. :func:`write_snapshot_lines` converts the
snapshot JSON that ``kafka-reassign snapshot`` writes.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from kafka_reassign.errors import Problem, SnapshotError
from kafka_reassign.cluster.snapshot import snapshot_problems

MARKER = "snapshot_lines"
PARTITION_FIELDS = ("topic", "partition", "replicas", "log_dirs", "size_bytes", "bytes_in_per_sec",
                    "leader", "remote_bytes", "consumer_bytes_per_sec")


def is_snapshot_lines(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is in this format (its first line is a header object with the marker)."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline(4 << 20)
        return isinstance((head := json.loads(first)), dict) and MARKER in head
    except (OSError, ValueError):
        return False


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header (brokers and topics) of a snapshot-lines file, validated.

    :raises SnapshotError: naming every problem of the brokers and topics
    """
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    try:
        head = json.loads(first)
    except ValueError as exc:
        raise SnapshotError([Problem("line 1", f"header is not JSON: {exc}", "bad_header")]) from None
    if not isinstance(head, dict) or MARKER not in head:
        raise SnapshotError([Problem("line 1", f"first line must be the header object with "
                                               f"{MARKER!r}", "bad_header")])
    topics = head.get("topics")
    shell = {"version": head.get("version"), "brokers": head.get("brokers"),
             "topics": [dict(t, partitions=[]) if isinstance(t, dict) else t
                        for t in (topics if isinstance(topics, list) else [])]}
    problems = snapshot_problems(shell, planning=True)
    if problems:
        raise SnapshotError(problems)
    return head


def header_of(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The header object for a snapshot dict."""
    return {MARKER: 1, "version": snapshot.get("version", 1), "brokers": snapshot.get("brokers", []),
            "topics": [{"name": t.get("name"), "configs": t.get("configs") or {}}
                       for t in snapshot.get("topics", [])]}


def partition_lines(snapshot: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One dict per partition of a snapshot dict (the lines after the header)."""
    for t in snapshot.get("topics", []):
        for p in t.get("partitions", []):
            row = {k: p.get(k) for k in PARTITION_FIELDS[1:] if k in p}
            row["topic"] = t.get("name")
            yield row


def write_lines(path: str | os.PathLike[str], header: dict[str, Any],
                rows: Iterable[dict[str, Any]]) -> Path:
    """Write a header and partition rows atomically (temp file + rename)."""
    out = Path(path)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
    os.replace(tmp, out)
    return out


def write_snapshot_lines(snapshot: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Convert a snapshot dict (``kafka-reassign snapshot`` format) to the lines file.

    :raises SnapshotError: the brokers or topics are invalid (partitions are checked by the job)
    """
    head = header_of(snapshot)
    if not isinstance(snapshot, dict):
        raise SnapshotError([Problem("snapshot", "must be a JSON object", "not_object")])
    return write_lines(path, head, partition_lines(snapshot))


def read_snapshot_dict(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The whole file as a snapshot dict, on the driver (for the driver-side goals only)."""
    head = read_header(path)
    topics = {t["name"]: dict(t, partitions=[]) for t in head["topics"]}
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            if line.strip():
                row = json.loads(line)
                name = row.pop("topic", None)
                topics.setdefault(name, {"name": name, "configs": {}, "partitions": []})["partitions"].append(row)
    return {"version": head.get("version", 1), "brokers": head["brokers"], "topics": list(topics.values())}
