"""How ``kafka-reassign cancel``, ``pause`` and ``resume`` reach a running ``kafka-reassign execute``.

A running execute registers itself in its record directory (``running-<run id>.json``: process
id, host, the plan) and checks after every poll for a cancel request (``cancel-<run id>``).
``cancel`` writes the request and waits for the execute to revert its in-flight moves and
restore the throttle itself; when no execute is alive any more (killed, machine lost), ``cancel``
does both from what the run registered and recorded. ``pause`` writes ``pause-<run id>``, read
before each poll: while it exists no new step starts (those in flight finish); ``resume`` removes it.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from kafka_reassign.errors import ReassignError


class CancelRequested(ReassignError):
    """Raised inside a running execute when ``kafka-reassign cancel`` asked it to stop."""


def _safe(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else f"%{ord(c):02X}" for c in run_id)


class RunControl:
    """The running-execute registry and cancel requests of one record directory.

    :param directory: the record directory shared by ``execute`` and ``cancel``
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _running(self, run_id: str) -> Path:
        return self.directory / f"running-{_safe(run_id)}.json"

    def _request(self, run_id: str) -> Path:
        return self.directory / f"cancel-{_safe(run_id)}"

    def _pause(self, run_id: str) -> Path:
        return self.directory / f"pause-{_safe(run_id)}"

    def register(self, run_id: str, plan: Any, original: dict[str, list[int]]) -> None:
        """Record that this process executes ``run_id``, with what a cancel after a crash needs.

        :param plan: the plan as given
        :param original: "topic-partition" -> its replicas before the run, in order
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        self._request(run_id).unlink(missing_ok=True)   # an old request must not stop a resumed run
        entry = {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(), "started_at": time.time(),
                 "plan": plan, "original": original}
        tmp = self._running(run_id).with_suffix(".tmp")
        tmp.write_text(json.dumps(entry), encoding="utf-8")
        os.replace(tmp, self._running(run_id))

    def unregister(self, run_id: str) -> None:
        """The execute finished (however): forget it and any request addressed to it."""
        self._running(run_id).unlink(missing_ok=True)
        self._request(run_id).unlink(missing_ok=True)
        self._pause(run_id).unlink(missing_ok=True)

    def running(self) -> list[dict[str, Any]]:
        """Every registered execute, oldest first (alive or not: see :meth:`is_alive`)."""
        out = []
        for path in self.directory.glob("running-*.json"):
            try:
                out.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue   # being replaced right now
        return sorted(out, key=lambda e: e.get("started_at", 0))

    def is_registered(self, run_id: str) -> bool:
        return self._running(run_id).exists()

    @staticmethod
    def is_alive(entry: dict[str, Any]) -> bool:
        """Whether the registered process still runs (only knowable on its own host)."""
        if entry.get("host") != socket.gethostname():
            return True   # another machine sharing the directory: assume so, it answers the request
        try:
            os.kill(int(entry["pid"]), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def request_cancel(self, run_id: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._request(run_id).write_text(f"{time.time()}\n", encoding="utf-8")

    def cancel_requested(self, run_id: str) -> bool:
        return self._request(run_id).exists()

    def request_pause(self, run_id: str) -> None:
        """Hold back new steps of ``run_id`` (those in flight finish) until :meth:`resume`.

        Kept across a restarted execute (unlike a cancel request): a paused run stays paused.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        self._pause(run_id).write_text(f"{time.time()}\n", encoding="utf-8")

    def resume(self, run_id: str) -> bool:
        """Lift a pause; returns whether the run was paused."""
        path = self._pause(run_id)
        was = path.exists()
        path.unlink(missing_ok=True)
        return was

    def pause_requested(self, run_id: str) -> bool:
        return self._pause(run_id).exists()


def original_replicas(entry: dict[str, Any]) -> dict[tuple[str, int], list[int]]:
    """The registered replicas-before-the-run, keyed by (topic, partition)."""
    out = {}
    for name, replicas in (entry.get("original") or {}).items():
        topic, _, part = name.rpartition("-")
        out[(topic, int(part))] = list(replicas)
    return out
