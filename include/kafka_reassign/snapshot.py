"""Cluster snapshots (DESIGN.md format, version 1): read, write, check, take from a live cluster.

A snapshot is the planner's input, the simulator's scenario and the output of
``kafka-reassign snapshot``::

    {"version": 1,
     "brokers": [{"id": 1, "rack": "a", "log_dirs": [{"path": "/d1", "capacity_bytes": 1e12}]}],
     "topics": [{"name": "t", "configs": {"min.insync.replicas": "2"},
                 "partitions": [{"partition": 0, "replicas": [1,2,3], "leader": 1,
                                 "size_bytes": 123, "bytes_in_per_sec": 0,
                                 "log_dirs": ["/d1","/d1","/d1"]}]}]}

Fields may be added (we add ``cluster_id``, ``isr``, ``alive``); none may change meaning.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_reassign.errors import Problem, SnapshotError

if TYPE_CHECKING:
    from kafka_reassign.admin import KafkaAdmin


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def validate_snapshot(snap: Any) -> None:
    """Check a snapshot's structure; raise :class:`SnapshotError` naming every bad field.

    :param snap: the decoded snapshot
    """
    problems: list[Problem] = []
    add = lambda where, why: problems.append(Problem(where, why, "bad_snapshot"))  # noqa: E731
    if not isinstance(snap, dict):
        raise SnapshotError([Problem("snapshot", f"must be a JSON object, got {type(snap).__name__}",
                                     "bad_snapshot")])
    if snap.get("version") != 1 or not _is_int(snap.get("version")):
        add("version", f"must be 1, got {snap.get('version')!r}")
    brokers = snap.get("brokers")
    broker_ids: set[int] = set()
    if not isinstance(brokers, list) or not brokers:
        add("brokers", "must be a non-empty list")
        brokers = []
    for i, b in enumerate(brokers):
        where = f"brokers[{i}]"
        if not isinstance(b, dict):
            add(where, "must be an object")
            continue
        if not _is_int(b.get("id")) or b["id"] < 0:
            add(f"{where}.id", f"must be an integer >= 0, got {b.get('id')!r}")
        elif b["id"] in broker_ids:
            add(f"{where}.id", f"duplicate broker id {b['id']}")
        else:
            broker_ids.add(b["id"])
        if b.get("rack") is not None and not isinstance(b["rack"], str):
            add(f"{where}.rack", f"must be a string or null, got {b['rack']!r}")
        dirs = b.get("log_dirs", [])
        if not isinstance(dirs, list):
            add(f"{where}.log_dirs", "must be a list")
            dirs = []
        for j, d in enumerate(dirs):
            if not isinstance(d, dict) or not isinstance(d.get("path"), str) or not d["path"]:
                add(f"{where}.log_dirs[{j}]", "must be an object with a non-empty path")
            elif "capacity_bytes" in d and (not _is_num(d["capacity_bytes"]) or d["capacity_bytes"] < 0):
                add(f"{where}.log_dirs[{j}].capacity_bytes", f"must be a number >= 0, got {d['capacity_bytes']!r}")
    topics = snap.get("topics")
    if not isinstance(topics, list):
        add("topics", "must be a list")
        topics = []
    names: set[str] = set()
    for i, t in enumerate(topics):
        where = f"topics[{i}]"
        if not isinstance(t, dict):
            add(where, "must be an object")
            continue
        name = t.get("name")
        if not isinstance(name, str) or not name:
            add(f"{where}.name", f"must be a non-empty string, got {name!r}")
        elif name in names:
            add(f"{where}.name", f"duplicate topic {name!r}")
        else:
            names.add(name)
            where = f"topics[{i}] ({name})"
        cfg = t.get("configs", {})
        if not isinstance(cfg, dict) or not all(isinstance(v, (str, int, float)) for v in cfg.values()):
            add(f"{where}.configs", "must be an object of strings")
        parts = t.get("partitions")
        if not isinstance(parts, list):
            add(f"{where}.partitions", "must be a list")
            continue
        seen: set[int] = set()
        for j, p in enumerate(parts):
            pw = f"{where}.partitions[{j}]"
            if not isinstance(p, dict):
                add(pw, "must be an object")
                continue
            idx = p.get("partition")
            if not _is_int(idx) or idx < 0:
                add(f"{pw}.partition", f"must be an integer >= 0, got {idx!r}")
            elif idx in seen:
                add(f"{pw}.partition", f"duplicate partition {idx}")
            else:
                seen.add(idx)
            reps = p.get("replicas")
            if not isinstance(reps, list) or not reps or not all(_is_int(r) for r in reps):
                add(f"{pw}.replicas", f"must be a non-empty list of broker ids, got {reps!r}")
            else:
                if len(set(reps)) != len(reps):
                    add(f"{pw}.replicas", f"duplicate broker in {reps}")
                unknown = sorted(set(reps) - broker_ids) if broker_ids else []
                if unknown:
                    add(f"{pw}.replicas", f"broker(s) {unknown} not in brokers")
                ld = p.get("log_dirs")
                if ld is not None and (not isinstance(ld, list) or len(ld) != len(reps)):
                    add(f"{pw}.log_dirs", "must be a list as long as replicas")
            if p.get("leader") is not None and not _is_int(p["leader"]):
                add(f"{pw}.leader", f"must be a broker id or null, got {p['leader']!r}")
            for k in ("size_bytes", "bytes_in_per_sec"):
                if k in p and (not _is_num(p[k]) or p[k] < 0):
                    add(f"{pw}.{k}", f"must be a number >= 0, got {p[k]!r}")
    if problems:
        raise SnapshotError(problems)


def load_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a snapshot file.

    :param path: JSON file
    """
    try:
        snap = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SnapshotError([Problem(str(path), f"cannot read: {exc.strerror or exc}", "unreadable")]) from None
    except json.JSONDecodeError as exc:
        raise SnapshotError([Problem(str(path), f"not valid JSON: {exc}", "not_json")]) from None
    validate_snapshot(snap)
    return snap


def save_snapshot(snap: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Check and write a snapshot atomically.

    :param snap: the snapshot
    :param path: destination file
    """
    validate_snapshot(snap)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(snap, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_cluster_snapshot(admin: "KafkaAdmin", sample_seconds: float = 0.0) -> dict[str, Any]:
    """Take a snapshot of a live cluster.

    Sizes come from DescribeLogDirs (the leader's replica). Produce rates are not exposed by
    the admin API; with ``sample_seconds > 0`` they are estimated from the growth of the
    leaders' log sizes over that interval (0 otherwise).

    :param admin: connected admin
    :param sample_seconds: measure bytes_in_per_sec over this many seconds
    """
    state = admin.cluster_state(include_log_dirs=True)
    rates: dict[tuple[str, int], float] = {}
    if sample_seconds > 0:
        t0 = time.monotonic()
        time.sleep(sample_seconds)
        later = admin.cluster_state(include_log_dirs=True)
        dt = max(1e-6, time.monotonic() - t0)
        for p in later.partitions():
            before = state.partition(p.topic, p.partition)
            if before is not None:
                rates[(p.topic, p.partition)] = max(0.0, (p.size_bytes - before.size_bytes) / dt)
        state = later
    brokers = []
    for b in sorted(state.brokers.values(), key=lambda x: x.id):
        brokers.append({"id": b.id, "rack": b.rack, "alive": b.alive,
                        "log_dirs": [{"path": d, "capacity_bytes": max(0, b.capacity_bytes.get(d, 0))}
                                     for d in b.log_dirs]})
    topics = []
    for t in sorted(state.topics.values(), key=lambda x: x.name):
        parts = []
        for p in sorted(t.partitions.values(), key=lambda x: x.partition):
            entry: dict[str, Any] = {"partition": p.partition, "replicas": list(p.replicas),
                                     "leader": p.leader if p.leader >= 0 else None, "isr": list(p.isr),
                                     "size_bytes": p.size_bytes,
                                     "bytes_in_per_sec": round(rates.get((p.topic, p.partition), 0.0), 3)}
            if p.replica_dirs and all(r in p.replica_dirs for r in p.replicas):
                entry["log_dirs"] = [p.replica_dirs[r] for r in p.replicas]
            parts.append(entry)
        topic: dict[str, Any] = {"name": t.name, "configs": dict(t.configs), "partitions": parts}
        if t.internal:
            topic["internal"] = True
        topics.append(topic)
    snap = {"version": 1, "cluster_id": state.cluster_id, "controller_id": state.controller_id,
            "default_min_isr": state.default_min_isr, "brokers": brokers, "topics": topics}
    return snap
