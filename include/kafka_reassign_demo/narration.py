"""The demo's voice: time-stamped lines, a narrator thread that keeps talking, quiet logs."""
from __future__ import annotations

import logging
import threading
import time
import warnings
from typing import Callable

from kafka_reassign.units import format_duration

#: Seconds between narration lines while the DAG runs (the issue's bound is 10).
NARRATION_INTERVAL = 5.0


class _DropMessages(logging.Filter):
    """Drops log records whose message starts with one of ``prefixes``."""

    def __init__(self, *prefixes: str) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)


def quiet_expected_warnings() -> None:
    """Hide warnings that are expected in a dag.test demo and would alarm a first-time user.

    - ``No tasks to run. unrunnable tasks``: dag.test's loop while a task is deferred or
      waiting for its reschedule time (a scheduler would simply wait).
    - ``Plugin ... already registered``: the plugin is found both as an installed entry
      point and through the DAG bag.
    - ``empty cryptography key``: the demo's throwaway SQLite DB stores Variables unencrypted.
    - Deprecation notices of third-party libraries (starlette's test client that dag.test uses).
    """
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
    warnings.filterwarnings("ignore", message=r"Using `httpx` with `starlette\.testclient` is deprecated")
    logging.getLogger("airflow.sdk.definitions.dag").addFilter(_DropMessages("No tasks to run"))
    logging.getLogger("airflow.plugins_manager").addFilter(_DropMessages("Plugin %s already registered",
                                                                         "Plugin '"))
    logging.getLogger("airflow.models.crypto").addFilter(_DropMessages("empty cryptography key"))
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


_T0 = time.monotonic()
_LAST_SAID = [time.monotonic()]


def say(text: str) -> None:
    """Print one narration line, stamped with the seconds since the demo started."""
    print(f"[{time.monotonic() - _T0:5.0f} s] {text}", flush=True)
    _LAST_SAID[0] = time.monotonic()


class Narrator:
    """Prints the latest status line every ``interval`` seconds until stopped.

    Two daemon threads: one refreshes the status (``status()`` may wait on the metadata DB or
    on the import lock while the DAG's tasks import their modules), the other only prints the
    latest line, so a slow refresh never makes the demo go silent.

    :param status: returns the line to print (it is called from a worker thread)
    :param interval: seconds between lines
    """

    def __init__(self, status: Callable[[], str], interval: float = NARRATION_INTERVAL) -> None:
        self.status, self.interval = status, interval
        self.latest = ("starting", time.monotonic())
        self._stop_event = threading.Event()
        self._threads = [threading.Thread(target=self._refresh, name="demo-status", daemon=True),
                         threading.Thread(target=self._print, name="demo-narrator", daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _refresh(self) -> None:
        while not self._stop_event.is_set():
            try:
                line = self.status()
            except Exception as exc:  # a narration failure must not end the demo
                line = f"(status unavailable: {exc})"
            if line != self.latest[0]:
                self.latest = (line, time.monotonic())
            self._stop_event.wait(1.0)

    def _print(self) -> None:
        while not self._stop_event.wait(max(0.2, self.interval - (time.monotonic() - _LAST_SAID[0]))):
            if time.monotonic() - _LAST_SAID[0] >= self.interval - 0.2:
                line, since = self.latest
                age = time.monotonic() - since
                say(line if age < self.interval else f"{line} (for {format_duration(age)})")

    def stop(self) -> None:
        self._stop_event.set()
        for t in self._threads:
            t.join(timeout=5)
