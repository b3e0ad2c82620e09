"""The durable record of what a run wrote, so anyone can undo it later.

The prior values are written to the store *before* the first config write: if the worker
dies between the two, the record says what to restore (restoring values that were never
changed is a no-op). A later run, ``kafka-reassign restore`` or the scheduled reconciler
finds unrestored records with :meth:`RecordStore.list_unrestored`.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, runtime_checkable

from kafka_reassign.errors import ThrottleRecordError
from kafka_reassign.throttle.specs import ConfigChange

TopicPartition = tuple[str, int]
#: Records of cordons (:mod:`kafka_reassign.throttle.cordon`): held until uncordoned, so not "unrestored"
#: for the reconciler, stale-record adoption or ``kafka-reassign restore``.
CORDON_RECORD_PREFIX = "cordon-broker-"


@dataclass
class ThrottleRecord:
    """Every config change a run made (with prior values) and whether it has been undone.

    :param run_id: the run that owns the changes
    :param cluster_id: Kafka cluster id (a record only applies to its cluster)
    :param created_at: unix time the record was first written
    :param changes: the writes, each with its prior value
    :param restored: True once every change has been undone
    :param restored_at: unix time of the restore
    :param notes: free text (e.g. "superseded by run X")
    :param pending: resources not restored yet, "broker 5" / "topic orders" -> why (unreachable,
        moves still in flight); the reconciler retries them
    :param submitted: partition -> the replica lists this run asked Kafka for, written *before*
        each AlterPartitionReassignments: an in-flight move is ours only when it is listed here.
        Partitions whose moves finished are dropped at the next write, so the record stays
        as small as the moves in flight, whatever the plan's size. Tuples: a copy of the record
        shares them (the executor writes the record at every refill).
    """

    run_id: str
    cluster_id: str | None
    created_at: float
    changes: list[ConfigChange] = field(default_factory=list)
    restored: bool = False
    restored_at: float | None = None
    notes: list[str] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)
    submitted: dict[TopicPartition, tuple[tuple[int, ...], ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "run_id": self.run_id, "cluster_id": self.cluster_id,
                "created_at": self.created_at, "changes": [c.to_json() for c in self.changes],
                "restored": self.restored, "restored_at": self.restored_at, "notes": list(self.notes),
                "pending": dict(sorted(self.pending.items())),
                "submitted": [{"topic": t, "partition": p, "targets": [list(x) for x in targets]}
                              for (t, p), targets in sorted(self.submitted.items())]}

    @classmethod
    def from_json(cls, raw: dict[str, Any] | str) -> "ThrottleRecord":
        d: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else raw
        return cls(run_id=d["run_id"], cluster_id=d.get("cluster_id"), created_at=float(d["created_at"]),
                   changes=[ConfigChange.from_json(c) for c in d.get("changes", [])],
                   restored=bool(d.get("restored", False)), restored_at=d.get("restored_at"),
                   notes=list(d.get("notes", [])), pending=dict(d.get("pending") or {}),
                   submitted={(e["topic"], int(e["partition"])): tuple(tuple(int(b) for b in x) for x in e["targets"])
                              for e in d.get("submitted") or []})

    def add_submitted(self, targets: Mapping[TopicPartition, Iterable[int]],
                      moving: Iterable[TopicPartition] | None = None) -> bool:
        """Note replica lists about to be submitted; return whether the record changed.

        :param moving: the partitions of this run still in flight; the others' entries go (a
            finished move is never adopted again: a later move to the same target is not ours)
        """
        new = False
        if moving is not None:
            # looked up where they are: copying thousands of moves in flight into one set cost more
            moving = moving if isinstance(moving, (set, frozenset)) else set(moving)
            gone = [k for k in self.submitted if k not in moving and k not in targets]
            for k in gone:
                del self.submitted[k]
            new = bool(gone)
        for key, target in targets.items():
            known = self.submitted.get(key, ())
            t = tuple(int(b) for b in target)
            if t not in known:
                self.submitted[key] = (*known, t)
                new = True
        return new

    def copy(self) -> "ThrottleRecord":
        """A copy that shares nothing mutable with this record (changes and targets are immutable)."""
        return replace(self, changes=list(self.changes), notes=list(self.notes), pending=dict(self.pending),
                       submitted=dict(self.submitted))

    @classmethod
    def new(cls, run_id: str, cluster_id: str | None, changes: list[ConfigChange]) -> "ThrottleRecord":
        return cls(run_id=run_id, cluster_id=cluster_id, created_at=time.time(), changes=list(changes))


@runtime_checkable
class RecordStore(Protocol):
    """Where throttle records live (a directory here; the Airflow metadata DB in the DAG)."""

    def put(self, record: ThrottleRecord) -> None:
        """Create or replace the record of ``record.run_id`` durably."""

    def get(self, run_id: str) -> ThrottleRecord | None:
        """The record of ``run_id`` or None."""

    def list_unrestored(self) -> list[ThrottleRecord]:
        """Every record not yet restored, oldest first."""

    def mark_restored(self, run_id: str) -> None:
        """Mark the record of ``run_id`` restored (no-op when already)."""


class RecordStoreBase:
    """What every store derives from ``put``, ``get`` and ``list_all`` (oldest first)."""

    def put(self, record: ThrottleRecord) -> None:
        raise NotImplementedError

    def get(self, run_id: str) -> ThrottleRecord | None:
        raise NotImplementedError

    def list_all(self) -> list[ThrottleRecord]:
        raise NotImplementedError

    def list_unrestored(self) -> list[ThrottleRecord]:
        return [r for r in self.list_all() if not r.restored and not r.run_id.startswith(CORDON_RECORD_PREFIX)]

    def mark_restored(self, run_id: str) -> None:
        rec = self.get(run_id)
        if rec is None:
            raise ThrottleRecordError(f"no throttle record for run {run_id!r} in {self}")
        if not rec.restored:
            rec.restored, rec.restored_at = True, time.time()
            self.put(rec)


def note_submitted(store: RecordStore, run_id: str, cluster_id: str | None,
                   targets: Mapping[TopicPartition, Iterable[int]],
                   moving: Iterable[TopicPartition] | None = None) -> ThrottleRecord:
    """Record, durably and *before* submitting them, the reassignments a run is about to start.

    Call it right before AlterPartitionReassignments (not for cancellations). Validation,
    cancellation and the reconciler treat an in-flight move as this project's only when a
    record lists its exact target, so a move another tool started is never adopted or
    cancelled. Creates the run's record when it has none (a run without throttle).

    :param store: the record store
    :param run_id: the submitting run
    :param cluster_id: the cluster (for a new record)
    :param targets: (topic, partition) -> replica list about to be submitted
    :param moving: the run's partitions still in flight (see :meth:`ThrottleRecord.add_submitted`)
    """
    record = store.get(run_id)
    if record is None or record.restored:
        fresh = ThrottleRecord.new(run_id, cluster_id, [])
        if record is not None:
            fresh.submitted = record.submitted
        record = fresh
        record.add_submitted(targets, moving)
        store.put(record)
    elif record.add_submitted(targets, moving):
        store.put(record)
    return record


def submitted_targets(store: RecordStore, cluster_id: str | None, run_id: str | None = None
                      ) -> dict[TopicPartition, list[tuple[int, ...]]]:
    """Every target this project's unrestored records (and ``run_id``'s record) say were submitted.

    These are the in-flight moves a run may adopt as its own: its own earlier tries and runs
    of ours that died before finishing (the cluster lock makes sure none of them is running).

    :param cluster_id: only records of this cluster (records without a cluster id count)
    """
    records = list(store.list_unrestored())
    own = store.get(run_id) if run_id else None
    if own is not None and own.restored:
        records.append(own)
    out: dict[TopicPartition, list[tuple[int, ...]]] = {}
    for rec in records:
        if cluster_id and rec.cluster_id and rec.cluster_id != cluster_id:
            continue
        for key, targets in rec.submitted.items():
            known = out.setdefault(key, [])
            known.extend(t for t in targets if t not in known)
    return out


_SAFE = re.compile(r"[^A-Za-z0-9._-]")



def write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` so that a crash leaves either the old or the new content, never a mix."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # fsync the directory so the rename itself survives a crash.
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)

def _file_name(run_id: str) -> str:
    # Airflow run ids contain ':' and '+'; keep names portable and unambiguous.
    safe = _SAFE.sub(lambda m: f"%{ord(m.group()):02X}", run_id)
    return f"throttle-{safe}.json"


class FileRecordStore(RecordStoreBase):
    """One JSON file per run in a directory; writes are atomic (temp file + fsync + rename).

    :param directory: created if missing
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ThrottleRecordError(f"cannot create record directory {self.directory}: {exc}") from exc

    def path_for(self, run_id: str) -> Path:
        return self.directory / _file_name(run_id)

    def put(self, record: ThrottleRecord) -> None:
        path = self.path_for(record.run_id)
        data = json.dumps(record.to_json(), indent=2, sort_keys=True).encode("utf-8")
        try:
            write_atomically(path, data)
        except OSError as exc:
            raise ThrottleRecordError(f"cannot write throttle record {path}: {exc}") from exc

    def get(self, run_id: str) -> ThrottleRecord | None:
        path = self.path_for(run_id)
        if not path.exists():
            return None
        return self._read(path)

    def _read(self, path: Path) -> ThrottleRecord:
        try:
            return ThrottleRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError) as exc:
            raise ThrottleRecordError(f"cannot read throttle record {path}: {exc}") from exc

    def list_all(self) -> list[ThrottleRecord]:
        records = [self._read(p) for p in sorted(self.directory.glob("throttle-*.json"))]
        return sorted(records, key=lambda r: r.created_at)

    def __repr__(self) -> str:
        return f"FileRecordStore({str(self.directory)!r})"


class MemoryRecordStore(RecordStoreBase):
    """In-process store (tests, dry runs). Not durable: do not use for real runs."""

    def __init__(self) -> None:
        # Copies, not JSON: the rehearsal writes the record at every refill, and parsing it back
        # each time was most of what its executor spent per refill.
        self._records: dict[str, ThrottleRecord] = {}

    def put(self, record: ThrottleRecord) -> None:
        self._records[record.run_id] = record.copy()

    def get(self, run_id: str) -> ThrottleRecord | None:
        r = self._records.get(run_id)
        return r.copy() if r is not None else None

    def list_all(self) -> list[ThrottleRecord]:
        return sorted((r.copy() for r in self._records.values()), key=lambda r: r.created_at)
