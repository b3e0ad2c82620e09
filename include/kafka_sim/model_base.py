"""What every part of the cluster model shares, below the state objects and the model's mixins.

Nothing here imports the model, so the state objects and the mixins that make up
:class:`~kafka_sim.model.ClusterModel` can use it without an import cycle.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Protocol, TypeVar

#: A follower within this many bytes of the leader counts as caught up (float rounding).
CATCH_UP_EPS = 0.5
#: Bound on physics sub-steps per advance; beyond it the remaining time is one step.
MAX_SUBSTEPS = 256


class Lockable(Protocol):
    """An object whose methods run under its ``lock`` (the model)."""

    lock: threading.RLock


F = TypeVar("F", bound=Callable[..., Any])


def locked(fn: F) -> F:
    """Run the method under the model's lock."""

    @functools.wraps(fn)
    def wrapper(self: Lockable, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return fn(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
