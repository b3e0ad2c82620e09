"""Cluster snapshots (docs/FORMATS.md, version 1): read, write, check, take from a live cluster.

A snapshot is the planner's input, the simulator's scenario and the output of
``kafka-reassign snapshot``::

    {"version": 1,
     "brokers": [{"id": 1, "rack": "a", "log_dirs": [{"path": "/d1", "capacity_bytes": 1e12}]}],
     "topics": [{"name": "t", "configs": {"min.insync.replicas": "2"},
                 "partitions": [{"partition": 0, "replicas": [1,2,3], "leader": 1,
                                 "size_bytes": 123, "bytes_in_per_sec": 0,
                                 "log_dirs": ["/d1","/d1","/d1"]}]}]}

Fields may be added (we add ``cluster_id``, ``isr``, ``alive``, ``remote_bytes``, ``batch_bytes``,
``consumer_bytes_per_sec``); none may
change meaning.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, TypeGuard

from kafka_reassign.cluster.batches import BatchReader, add_batch_bytes
from kafka_reassign.cluster.capacities import FROM_BROKER, FROM_USER, CapacityOverrides, apply_capacities
from kafka_reassign.cluster.consumers import CONSUMER_BYTES, measure_consumption, sample_groups
from kafka_reassign.cluster.port import ClusterReader, TieredReader
from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.cluster.tiered import REMOTE_STORAGE_CONFIG, is_tiered
from kafka_reassign.cluster.state import BrokerInfo
from kafka_reassign.errors import Problem, SnapshotError


def is_int(v: object) -> TypeGuard[int]:
    """An integer that is not a bool (``True`` is not a broker id)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: object) -> TypeGuard[int | float]:
    """A finite int or float that is not a bool (JSON allows NaN and Infinity; we do not)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


ANY_LOG_DIR = "any"  # a replica placed in whichever log dir its broker picks (Kafka's reassignment JSON)


def snapshot_problems(snap: Any, *, planning: bool = False) -> list[Problem]:
    """Every problem of a snapshot, each naming its location and reason; ``[]`` when it is fine.

    This is the one structural check of the snapshot format: the CLI, the domain and the
    planner (:meth:`kafka_reassign.planning.spark.cluster.Cluster.from_snapshot`) all use it.
    Locations read like ``brokers[3] (broker 7).log_dirs[0].capacity_bytes`` or
    ``topics[2].partitions[5] (orders-5).replicas[1]``.

    :param snap: the decoded snapshot
    :param planning: also require what the planner needs beyond the format: every broker has
        at least one log dir with a positive ``capacity_bytes``, racks on all brokers or none
        (non-empty strings), leaders among the replicas, and partition log dirs that name a
        log dir of their broker
    """
    problems: list[Problem] = []

    def bad(entry: str, reason: str, kind: str = "invalid") -> None:
        problems.append(Problem(entry, reason, kind))

    if not isinstance(snap, dict):
        return [Problem("snapshot", f"must be a JSON object, got {type(snap).__name__}", "not_object")]
    if snap.get("version") != 1 or not is_int(snap.get("version")):
        bad("version", f"must be 1, got {snap.get('version')!r}", "bad_version")
    broker_at, dir_paths = _broker_problems(snap.get("brokers"), planning, bad)
    raw_topics = snap.get("topics")
    if not isinstance(raw_topics, list):
        bad("topics", "missing or not a list", "bad_topics")
        raw_topics = []
    topic_at: dict[str, int] = {}
    brokers = _Brokers(broker_at, dir_paths, planning)
    for ti, t in enumerate(raw_topics):
        _topic_problems(t, ti, topic_at, brokers, bad)
    return problems


#: ``bad(entry, reason, kind="invalid")``: how the checks below report a problem.
_Report = Callable[..., None]


@dataclass(frozen=True)
class _Brokers:
    """What the partition checks need to know of the brokers already checked.

    :param broker_at: broker id -> index of its first entry
    :param dir_paths: broker id -> its valid log dir paths
    :param planning: the planner's stricter checks are on
    """

    broker_at: dict[int, int]
    dir_paths: dict[int, list[str]]
    planning: bool


def _broker_problems(raw_brokers: Any, planning: bool,
                     bad: _Report) -> tuple[dict[int, int], dict[int, list[str]]]:
    """Check ``brokers``; returns (broker id -> index of its first entry, broker id -> valid log dirs)."""
    if not isinstance(raw_brokers, list) or not raw_brokers:
        bad("brokers", "missing or empty: a snapshot needs at least one broker", "no_brokers")
        raw_brokers = []
    broker_at: dict[int, int] = {}
    dir_paths: dict[int, list[str]] = {}
    racked = 0
    for i, b in enumerate(raw_brokers):
        where = f"brokers[{i}]"
        if not isinstance(b, dict):
            bad(where, f"must be an object, got {type(b).__name__}")
            continue
        bid = b.get("id")
        if not is_int(bid) or bid < 0:
            bad(f"{where}.id", f"must be an integer >= 0, got {bid!r}", "bad_broker_id")
            continue
        where = f"brokers[{i}] (broker {bid})"
        if bid in broker_at:
            bad(f"{where}.id", f"duplicate broker id {bid}: it appears twice (first at "
                               f"brokers[{broker_at[bid]}])", "duplicate_broker")
            continue
        broker_at[bid] = i
        rack = b.get("rack")
        if rack is not None and (not isinstance(rack, str) or (planning and not rack)):
            bad(f"{where}.rack", f"must be a {'non-empty ' if planning else ''}string or null, got {rack!r}",
                "bad_rack")
        elif rack is not None:
            racked += 1
        dir_paths[bid] = _log_dir_paths(b.get("log_dirs", []), where, planning, bad)
        net = b.get("network_bytes_per_sec", 1)
        if not is_num(net) or net <= 0:
            bad(f"{where}.network_bytes_per_sec", f"must be a positive number, got {net!r}")
    if planning and 0 < racked < len(broker_at):
        bad("brokers", f"{racked} of {len(broker_at)} brokers have a rack: either all brokers "
                       "have broker.rack or none (as Kafka requires for rack-aware placement)", "mixed_racks")
    return broker_at, dir_paths


def _log_dir_paths(raw_dirs: Any, where: str, planning: bool, bad: _Report) -> list[str]:
    """Check one broker's ``log_dirs``; returns the paths of the valid ones."""
    if not isinstance(raw_dirs, list) or (planning and not raw_dirs):
        bad(f"{where}.log_dirs", "missing or empty: each broker needs at least one log dir "
                                 "with capacity_bytes" if planning else "must be a list", "no_log_dirs")
        raw_dirs = []
    paths: list[str] = []
    for j, d in enumerate(raw_dirs):
        dwhere = f"{where}.log_dirs[{j}]"
        if not isinstance(d, dict) or not isinstance(d.get("path"), str) or not d["path"]:
            bad(dwhere, "must be an object with a non-empty 'path'", "bad_log_dir")
            continue
        if d["path"] in paths:
            bad(dwhere, f"log dir {d['path']} appears twice", "duplicate_log_dir")
            continue
        cap = d.get("capacity_bytes")
        if planning and (not is_num(cap) or cap <= 0):
            bad(f"{dwhere}.capacity_bytes", f"must be a positive number, got {cap!r}", "bad_capacity")
            continue
        if "capacity_bytes" in d and (not is_num(cap) or cap < 0):
            bad(f"{dwhere}.capacity_bytes", f"must be a number >= 0, got {cap!r}", "bad_capacity")
            continue
        for key in ("total_bytes", "usable_bytes"):  # as the broker reported them (KIP-827)
            if key in d and (not is_num(d[key]) or d[key] < 0):
                bad(f"{dwhere}.{key}", f"must be a number >= 0, got {d[key]!r}", "bad_capacity")
        if d.get("capacity_source", FROM_BROKER) not in (FROM_BROKER, FROM_USER):
            bad(f"{dwhere}.capacity_source", f"must be {FROM_BROKER!r} or {FROM_USER!r}, "
                                             f"got {d['capacity_source']!r}", "bad_capacity")
        if not isinstance(d.get("cordoned", False), bool):  # the dir itself is known: its replicas stay valid
            bad(f"{dwhere}.cordoned", f"must be true or false, got {d['cordoned']!r}", "bad_cordoned")
        paths.append(d["path"])
    return paths


def _topic_problems(t: Any, ti: int, topic_at: dict[str, int], brokers: _Brokers, bad: _Report) -> None:
    """Check ``topics[ti]`` and its partitions; ``topic_at`` (name -> first index) finds duplicates."""
    twhere = f"topics[{ti}]"
    if not isinstance(t, dict):
        bad(twhere, f"must be an object, got {type(t).__name__}", "bad_topic")
        return
    name = t.get("name")
    if not isinstance(name, str) or not name:
        bad(f"{twhere}.name", f"must be a non-empty string, got {name!r}", "bad_topic")
        name = None
    else:
        twhere = f"topics[{ti}] ({name})"
        if name in topic_at:
            bad(f"{twhere}.name", f"duplicate topic {name!r}: it appears twice (first at "
                                  f"topics[{topic_at[name]}])", "duplicate_topic")
        else:
            topic_at[name] = ti
    cfg = t.get("configs") or {}
    if not isinstance(cfg, dict) or not all(isinstance(v, (str, int, float)) for v in cfg.values()):
        bad(f"{twhere}.configs", "must be an object of strings", "bad_configs")
    elif "min.insync.replicas" in cfg:
        try:
            int(str(cfg["min.insync.replicas"]))
        except ValueError:
            bad(f"{twhere}.configs.min.insync.replicas",
                f"must be an integer, got {cfg['min.insync.replicas']!r}", "bad_configs")
    raw_parts = t.get("partitions")
    if not isinstance(raw_parts, list):
        bad(f"{twhere}.partitions", "missing or not a list", "bad_partitions")
        return
    seen: set[int] = set()
    for pi, p in enumerate(raw_parts):
        pwhere = f"{twhere}.partitions[{pi}]"
        if not isinstance(p, dict):
            bad(pwhere, f"must be an object, got {type(p).__name__}")
            continue
        pid = p.get("partition")
        if not is_int(pid) or pid < 0:
            bad(f"{pwhere}.partition", f"must be an integer >= 0, got {pid!r}", "bad_partition_id")
        else:
            if name is not None:
                pwhere = f"topics[{ti}].partitions[{pi}] ({name}-{pid})"
            if pid in seen:
                bad(f"{pwhere}.partition", f"duplicate partition {pid}: it appears twice", "duplicate_partition")
            seen.add(pid)
        _partition_problems(p, pwhere, brokers.broker_at, brokers.dir_paths, brokers.planning, bad)


def _partition_problems(p: dict[str, Any], pwhere: str, broker_at: dict[int, int],
                        dir_paths: dict[int, list[str]], planning: bool,
                        bad: Callable[..., None]) -> None:
    """The checks of one partition entry (replicas, leader, sizes, log dirs); see snapshot_problems."""
    for k in ("size_bytes", "remote_bytes", "bytes_in_per_sec", CONSUMER_BYTES):
        v = p.get(k, 0)
        rate = k in ("bytes_in_per_sec", CONSUMER_BYTES)
        if rate and v is None:
            continue  # an unmeasured rate
        if not is_num(v) or v < 0:
            bad(f"{pwhere}.{k}", f"must be a number >= 0, got {v!r}", "bad_rate" if rate else "bad_size")
    reps = p.get("replicas")
    if not isinstance(reps, list) or not reps or not all(is_int(r) for r in reps):
        bad(f"{pwhere}.replicas", f"must be a non-empty list of broker ids, got {reps!r}", "bad_replicas")
        reps = None
    else:
        if len(set(reps)) != len(reps):
            bad(f"{pwhere}.replicas", f"lists a broker twice: {reps}", "duplicate_replica")
        if broker_at:
            for ri, r in enumerate(reps):
                if r not in broker_at:
                    bad(f"{pwhere}.replicas[{ri}]", f"broker {r} is not in brokers", "unknown_broker")
    leader = p.get("leader")
    if leader is not None and not is_int(leader):
        bad(f"{pwhere}.leader", f"must be a broker id or null, got {leader!r}", "bad_leader")
    elif planning and reps is not None and leader is not None and leader != -1 and leader not in reps:
        bad(f"{pwhere}.leader", f"must be one of the replicas {reps}, -1 or null, got {leader!r}", "bad_leader")
    ld = p.get("log_dirs")
    if ld is None or reps is None:
        return
    if not isinstance(ld, list) or len(ld) != len(reps) or \
            not all(d is None or (isinstance(d, str) and d) for d in ld):
        bad(f"{pwhere}.log_dirs", f"must be a list as long as replicas (one log dir, 'any' or null per "
                                  f"replica: {len(reps)}), got {ld!r}", "bad_log_dirs")
        return
    if not planning:
        return
    for ri, (r, d) in enumerate(zip(reps, ld)):
        paths = dir_paths.get(r)
        if d not in (None, ANY_LOG_DIR) and paths and d not in paths:
            bad(f"{pwhere}.log_dirs[{ri}]", f"{d!r} is not a log dir of broker {r} ({', '.join(paths)})",
                "unknown_log_dir")


def validate_snapshot(snap: Any, *, planning: bool = False) -> None:
    """Check a snapshot; raise :class:`SnapshotError` naming every problem (see :func:`snapshot_problems`).

    :param snap: the decoded snapshot
    :param planning: also require what the planner needs (log dir capacities, racks, leaders)
    """
    problems = snapshot_problems(snap, planning=planning)
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


def read_cluster_snapshot(admin: ClusterReader, sample_seconds: float = 0.0,
                          capacities: CapacityOverrides | None = None) -> dict[str, Any]:
    """Take a snapshot of a live cluster.

    Sizes come from DescribeLogDirs (the leader's replica): the local log, what a move copies. Partitions of
    tiered topics (``remote.storage.enable=true``) also get ``remote_bytes``, the bytes only in remote storage
    (:mod:`kafka_reassign.cluster.tiered`). Produce rates are not exposed by the admin API; with
    ``sample_seconds > 0`` they are estimated from the growth of the leaders' log sizes over that interval
    (0 otherwise), and partitions get the ``batch_bytes`` their first record batch shows (:mod:`~.batches`)
    and the ``consumer_bytes_per_sec`` the consumer groups' committed offsets show over the same interval
    (:mod:`~.consumers`; left out, with one warning, where the cluster cannot answer).
    Each log dir carries the ``total_bytes`` and ``usable_bytes`` its broker reports (KIP-827) and a
    ``capacity_bytes``: the given one (``capacity_source: user``), else the reported total (``broker``).

    :param admin: connected admin
    :param sample_seconds: measure bytes_in_per_sec over this many seconds
    :param capacities: the operator's capacities (run parameter ``log_dir_capacity_bytes``);
        one naming a broker or log dir the cluster lacks raises ParamError
    """
    state, rates, consumed = _sampled(admin, sample_seconds)
    remote = remote_sizes(admin, state)
    brokers = []
    for b in sorted(state.brokers.values(), key=lambda x: x.id):
        brokers.append({"id": b.id, "rack": b.rack, "alive": b.alive,
                        "log_dirs": [_log_dir_entry(b, d) for d in b.log_dirs]})
    topics = []
    for t in sorted(state.topics.values(), key=lambda x: x.name):
        parts = []
        for p in sorted(t.partitions.values(), key=lambda x: x.partition):
            entry: dict[str, Any] = {"partition": p.partition, "replicas": list(p.replicas),
                                     "leader": p.leader if p.leader >= 0 else None, "isr": list(p.isr),
                                     "size_bytes": p.size_bytes,
                                     "bytes_in_per_sec": round(rates.get((p.topic, p.partition), 0.0), 3)}
            if (t.name, p.partition) in consumed:
                entry[CONSUMER_BYTES] = round(consumed[(t.name, p.partition)], 3)
            if p.partition in remote.get(t.name, {}):
                entry["remote_bytes"] = remote[t.name][p.partition]
            if p.replica_dirs and all(r in p.replica_dirs for r in p.replicas):
                entry["log_dirs"] = [p.replica_dirs[r] for r in p.replicas]
            parts.append(entry)
        topic: dict[str, Any] = {"name": t.name, "configs": dict(t.configs), "partitions": parts}
        if t.name in remote:
            topic["configs"][REMOTE_STORAGE_CONFIG] = "true"
        if t.internal:
            topic["internal"] = True
        topics.append(topic)
    snap = {"version": 1, "cluster_id": state.cluster_id, "controller_id": state.controller_id,
            "default_min_isr": state.default_min_isr, "brokers": brokers, "topics": topics}
    if capacities:
        apply_capacities(snap, capacities)
    if sample_seconds > 0 and isinstance(admin, BatchReader):  # the rehearsal's fetch-per-batch model
        add_batch_bytes(admin, snap)
    return snap


def _sampled(admin: ClusterReader, sample_seconds: float
             ) -> tuple[ClusterState, dict[tuple[str, int], float], dict[tuple[str, int], float]]:
    """The cluster state at the end of the sampling interval, the produce rates over it (the growth
    of the leaders' logs) and the bytes consumer groups read in it (:mod:`~.consumers`)."""
    state = admin.cluster_state(include_log_dirs=True)
    if sample_seconds <= 0:
        return state, {}, {}
    t0 = time.monotonic()
    groups = sample_groups(admin)
    time.sleep(sample_seconds)
    later = admin.cluster_state(include_log_dirs=True)
    consumed = measure_consumption(admin, groups, later)
    dt = max(1e-6, time.monotonic() - t0)
    rates: dict[tuple[str, int], float] = {}
    for p in later.partitions():
        before = state.partition(p.topic, p.partition)
        if before is not None:
            rates[(p.topic, p.partition)] = max(0.0, (p.size_bytes - before.size_bytes) / dt)
    return later, rates, consumed


def _log_dir_entry(broker: BrokerInfo, path: str) -> dict[str, Any]:
    """One log dir of a snapshot: its capacity and the volume's total and usable bytes as reported."""
    total = broker.capacity_bytes.get(path, -1)
    entry: dict[str, Any] = {"path": path, "capacity_bytes": max(0, total)}
    if total > 0:
        entry.update(capacity_source=FROM_BROKER, total_bytes=total)
    if path in broker.usable_bytes:
        entry["usable_bytes"] = broker.usable_bytes[path]
    if path in broker.cordoned_dirs:
        entry["cordoned"] = True
    return entry


def remote_sizes(admin: ClusterReader, state: ClusterState) -> dict[str, dict[int, int]]:
    """Tiered topic (KIP-405) -> partition -> bytes only in remote storage, estimated from the
    leader's offsets (:class:`~kafka_reassign.cluster.tiered.TieredOffsets`). Every tiered
    topic is a key; a partition whose offsets are not answered is left out of it.

    Only tiered topics are asked about, so a cluster without tiered storage pays one
    DescribeConfigs and no ListOffsets.

    :param admin: connected admin (a reader without ListOffsets measures nothing)
    :param state: the cluster state whose local sizes scale the offsets
    """
    if not isinstance(admin, TieredReader) or not state.topics:
        return {}
    configs = admin.describe_configs(topics=sorted(state.topics), keys=[REMOTE_STORAGE_CONFIG])
    tiered = [t for t in state.topics.values() if is_tiered(configs.get(("topic", t.name), {}))]
    if not tiered:
        return {}
    offsets = admin.tiered_offsets([(t.name, i) for t in tiered for i in t.partitions])
    return {t.name: {i: offsets[(t.name, i)].remote_bytes(p.size_bytes)
                     for i, p in t.partitions.items() if (t.name, i) in offsets} for t in tiered}


def with_remote_sizes(admin: ClusterReader, state: ClusterState, topics: Iterable[str]) -> ClusterState:
    """``state`` whose partitions of the tiered ones of ``topics`` carry ``remote_bytes`` (read
    live by :func:`remote_sizes`; a state built from a snapshot already has them).

    :param admin: connected admin
    :param state: the cluster state
    :param topics: the topics to look at (the moving ones)
    """
    if any(p.remote_bytes for p in state.partitions()):
        return state
    remote = remote_sizes(admin, replace(state, topics={t: state.topics[t] for t in topics if t in state.topics}))
    if not any(remote.values()):
        return state
    return replace(state, topics={name: t if name not in remote else replace(t, partitions={
        i: replace(p, remote_bytes=remote[name].get(i, 0)) for i, p in t.partitions.items()})
        for name, t in state.topics.items()})
