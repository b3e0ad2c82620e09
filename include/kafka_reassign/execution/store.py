"""Where a run's execution state and progress live between polls (and after a crash).

The executor saves after every poll: ``state`` (what :meth:`MoveExecutor.load_state` resumes
from) and ``progress`` (the :class:`~kafka_reassign.execution.progress.ProgressView` the UI and
``kafka-reassign status`` show). The CLI keeps them in a file per run next to the throttle
records; the DAG in an Airflow Variable (``kafka_reassign_airflow.record_store``).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kafka_reassign.throttle.record import write_atomically

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@runtime_checkable
class ExecutionStore(Protocol):
    """Durable per-run execution state."""

    def save(self, run_id: str, state: dict[str, Any], progress: dict[str, Any]) -> None:
        """Replace the run's saved state and progress (atomically)."""

    def load(self, run_id: str) -> dict[str, Any] | None:
        """``{"state": ..., "progress": ...}`` of the run, or None."""


class FileExecutionStore:
    """One compact JSON file per run (``exec-<run id>.json``), written atomically.

    :param directory: created if missing
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path_for(self, run_id: str) -> Path:
        # Airflow run ids carry ':' and '+': keep file names portable and unambiguous.
        return self.directory / ("exec-" + _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", run_id) + ".json")

    def save(self, run_id: str, state: dict[str, Any], progress: dict[str, Any]) -> None:
        path = self.path_for(run_id)
        data = json.dumps({"state": state, "progress": progress}, separators=(",", ":")).encode("utf-8")
        write_atomically(path, data)

    def load(self, run_id: str) -> dict[str, Any] | None:
        path = self.path_for(run_id)
        if not path.exists():
            return None
        return json.loads(path.read_text(encoding="utf-8"))


class MemoryExecutionStore:
    """In-process store (tests, rehearsals): keeps every save's JSON text, like a durable store would."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}
        self.saves = 0

    def save(self, run_id: str, state: dict[str, Any], progress: dict[str, Any]) -> None:
        self.saved[run_id] = json.dumps({"state": state, "progress": progress}, separators=(",", ":"))
        self.saves += 1

    def load(self, run_id: str) -> dict[str, Any] | None:
        raw = self.saved.get(run_id)
        return json.loads(raw) if raw is not None else None
