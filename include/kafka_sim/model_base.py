"""What every part of the cluster model shares, below the state objects and the model's mixins.

Nothing here imports the model, so the state objects and the mixins that make up
:class:`~kafka_sim.model.ClusterModel` can use it without an import cycle.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Generic, Hashable, Iterable, Iterator, Protocol, TypeVar

#: A follower within this many bytes of the leader counts as caught up (float rounding).
CATCH_UP_EPS = 0.5
#: Bound on physics sub-steps per advance; beyond it the remaining time is one step.
MAX_SUBSTEPS = 256


class Lockable(Protocol):
    """An object whose methods run under its ``lock`` (the model)."""

    lock: threading.RLock


F = TypeVar("F", bound=Callable[..., Any])
H = TypeVar("H", bound=Hashable)


class OrderedSet(Generic[H]):
    """A set iterated in insertion order (the keys of a dict).

    Partitions hash by identity, so a plain set of them is iterated in an order that differs
    between processes; the physics visits changed and active partitions in that order, and
    equal-time events then resolve differently from run to run. Insertion order is the order
    of the model's own operations, the same in every run of the same input.

    :param items: initial members, in order
    """

    __slots__ = ("_keys",)

    def __init__(self, items: Iterable[H] = ()) -> None:
        self._keys: dict[H, None] = dict.fromkeys(items)

    def add(self, item: H) -> None:
        self._keys[item] = None

    def discard(self, item: H) -> None:
        self._keys.pop(item, None)

    def clear(self) -> None:
        self._keys.clear()

    def __contains__(self, item: object) -> bool:
        return item in self._keys

    def __iter__(self) -> Iterator[H]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def locked(fn: F) -> F:
    """Run the method under the model's lock."""

    @functools.wraps(fn)
    def wrapper(self: Lockable, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return fn(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
