"""Pure-Python work of one big plan split over forked processes.

The planner's driver stages after Spark are plain Python on one core while the machine's other
cores idle (the summary's estimate at 3M replicas: ~20 CPU s of per-step work). A forked child
inherits the parent's objects, so nothing is pickled on the way in; only its result comes back
through a pipe. Children compute and exit: no I/O of their own, no Spark (py4j), no exit hooks.
"""
from __future__ import annotations

import functools
import os
import pickle
import signal
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")

#: Work on at least this many items (moves, changed partitions) is split over processes: a fork
#: costs tens of milliseconds, the Python of 100k moves' steps about two seconds.
SPLIT_FROM = 100_000


def processes_for(items: int) -> int:
    """Processes for work on ``items`` items: :func:`processes` from :data:`SPLIT_FROM` on, else 1."""
    return processes() if items >= SPLIT_FROM else 1


def processes() -> int:
    """How many processes a split may use: the cores this process may run on (2 at most: the
    splits here are two-way; 1 where the platform cannot fork)."""
    if not hasattr(os, "fork"):
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(2, cores))


def fork_map(fn: Callable[[int], T], n: int) -> list[T]:
    """``[fn(0), ..., fn(n - 1)]``: ``fn(1..n-1)`` each in a forked child, ``fn(0)`` here meanwhile.

    In one process where the platform cannot fork or ``n`` is 1. A child's exception is raised
    here; a child killed without a result raises :class:`RuntimeError`.

    :param fn: pure computation on objects the parent already holds; its result must pickle
    :param n: how many pieces
    """
    if n <= 1 or not hasattr(os, "fork"):
        return [fn(i) for i in range(n)]
    children = [_start(fn, i) for i in range(1, n)]
    try:
        first = fn(0)
    except BaseException:
        for pid, fd in children:
            os.kill(pid, signal.SIGKILL)
            os.close(fd)
            os.waitpid(pid, 0)
        raise
    return [first, *(_collect(pid, fd) for pid, fd in children)]


class Forked(Generic[T]):
    """``fn(*args)`` computed in a forked child from now on, while this process goes on;
    :meth:`result` waits for it (and computes it then and there without ``fork``).

    :param fork: False: no child (a small input, or one core); the call waits for :meth:`result`
    :param fn: pure computation on objects this process already holds; its result must pickle
    :param nice: the child's niceness: 19 makes it take only what CPU this process leaves idle
    """

    def __init__(self, fork: bool, fn: Callable[..., T], *args: Any, nice: int = 0) -> None:
        self._call = functools.partial(fn, *args)
        self._child = _start(lambda _: self._niced(nice), 0) if fork and hasattr(os, "fork") else None

    def _niced(self, nice: int) -> T:
        if nice:
            os.nice(nice)
        return self._call()

    def result(self) -> T:
        """The call's result, or its exception raised here; asked once."""
        if self._child is None:
            return self._call()
        pid, fd = self._child
        return _collect(pid, fd)

    def cancel(self) -> None:
        """Stop the child (when there is one) without its result."""
        if self._child is not None:
            pid, fd = self._child
            self._child = None
            os.kill(pid, signal.SIGKILL)
            os.close(fd)
            os.waitpid(pid, 0)


def _start(fn: Callable[[int], T], i: int) -> tuple[int, int]:
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    try:  # the child: never returns into the parent's code (os._exit skips its exit hooks)
        os.close(read)
        try:
            payload = pickle.dumps((True, fn(i)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            payload = _failure(exc)
        with os.fdopen(write, "wb") as out:
            out.write(payload)
    finally:
        os._exit(0)


def _failure(exc: BaseException) -> bytes:
    try:
        return pickle.dumps((False, exc), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an exception that does not pickle goes back as its text
        return pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))


def _collect(pid: int, fd: int) -> Any:
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        raise RuntimeError(f"forked worker {pid} ended without a result (wait status {status})")
    ok, value = pickle.loads(data)
    if not ok:
        raise value
    return value
