"""Which eligible step goes next: ordering strategies, as Cruise Control's replica movement
strategies (``BaseReplicaMovementStrategy``, ``PrioritizeLargeReplicaMovementStrategy``,
``PrioritizeSmallReplicaMovementStrategy``, ``PostponeUrpReplicaMovementStrategy``).

Strategies can be chained with commas, the first deciding and the next ones breaking ties,
e.g. ``postpone-urp,largest-first``; the plan order breaks the last ties, so the order is
deterministic.

* ``largest-first`` (default) / ``smallest-first``: by the bytes the step copies. Largest first
  keeps the run's tail short: what starts last is small (see ``defaults.MOVEMENT_STRATEGY``).
* ``busiest-brokers``: steps whose throttle lanes (the sender's outbound, each receiver's
  inbound: Kafka's two quotas) have the most bytes left to move in the whole plan go first, then the partitions with the most
  bytes left in their chain of steps. The run lasts as long as its busiest broker needs at the
  throttle, so that broker must never wait, and long chains must start early.
* ``postpone-urp``: partitions that were under-replicated when the run was prepared go last.

The eligible steps are kept in buckets of steps that share their brokers (and the keys of the
strategies before ``busiest-brokers``), each bucket sorted once. A refill orders the buckets
by how busy their brokers are now and walks them, so its cost follows the number of brokers,
not the size of the plan.
"""
from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar, Union

from kafka_reassign.defaults import MOVEMENT_STRATEGIES, MOVEMENT_STRATEGY

DEFAULT_STRATEGY = MOVEMENT_STRATEGY

T = TypeVar("T")
#: per-step values by step index: a list over the plan, or a dict over the steps loaded
Indexed = Union[Sequence[T], Mapping[int, T]]


class OrderContext:
    """What strategies look at, kept up to date by the executor.

    :param lanes_left: throttle lane -> bytes still to pass it in the plan
    :param chain_left: step index -> bytes of this step and the partition's later steps
    :param step_bytes: step index -> bytes the step copies
    :param lanes: step index -> the throttle lanes its bytes pass (:func:`~kafka_reassign.execution.book.step_lanes`)
    :param urp: step indices of partitions under-replicated at prepare time
    """

    def __init__(self, lanes_left: dict[int, float], chain_left: Indexed[float], step_bytes: Indexed[float],
                 lanes: Indexed[tuple[int, ...]], urp: set[int]) -> None:
        self.lanes_left = lanes_left
        self.chain_left = chain_left
        self.step_bytes = step_bytes
        self.lanes = lanes
        self.urp = urp


StaticKey = Callable[[OrderContext, int], tuple[Any, ...]]
BrokerKey = Callable[[OrderContext, tuple[int, ...]], tuple[Any, ...]]


def _busiest_now(ctx: OrderContext, lanes: tuple[int, ...]) -> tuple[Any, ...]:
    return (-max((ctx.lanes_left.get(b, 0.0) for b in lanes), default=0.0),)


#: name -> (key of the step's brokers as they are now or None, static key of the step)
STRATEGIES: dict[str, tuple[BrokerKey | None, StaticKey]] = {
    "busiest-brokers": (_busiest_now, lambda ctx, i: (-ctx.chain_left[i],)),
    "largest-first": (None, lambda ctx, i: (-ctx.step_bytes[i],)),
    "smallest-first": (None, lambda ctx, i: (ctx.step_bytes[i],)),
    "postpone-urp": (None, lambda ctx, i: (i in ctx.urp,)),
}


assert tuple(STRATEGIES) == MOVEMENT_STRATEGIES, "kafka_reassign.defaults lists the strategies for the DAG params"


def parse_strategy(spec: str | None) -> list[str]:
    """``"postpone-urp,largest-first"`` -> names; raises ValueError naming an unknown one."""
    names = [n.strip() for n in (spec or DEFAULT_STRATEGY).split(",") if n.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown or not names:
        raise ValueError(f"unknown ordering strategy {', '.join(unknown) or spec!r}: use one or more of "
                         f"{', '.join(STRATEGIES)} separated by commas")
    return names


class ReadyQueue:
    """The eligible steps, in buckets walked in strategy order.

    :param names: parsed strategy names
    :param ctx: what the strategies look at
    """

    def __init__(self, names: Sequence[str], ctx: OrderContext) -> None:
        self.ctx = ctx
        dyn_at = next((k for k, n in enumerate(names) if STRATEGIES[n][0] is not None), None)
        self._before = [STRATEGIES[n][1] for n in names[:dyn_at]] if dyn_at is not None else []
        self._dyn = STRATEGIES[names[dyn_at]][0] if dyn_at is not None else None
        rest = names[dyn_at:] if dyn_at is not None else names
        self._within = [STRATEGIES[n][1] for n in rest]
        #: buckets hold steps with the same lanes (a full receiving broker rules out a bucket)
        self.by_brokers = self._dyn is not None
        self.buckets: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int]]] = {}
        self._where: dict[int, tuple[Any, ...]] = {}

    def _bucket(self, i: int) -> tuple[Any, ...]:
        head: tuple[Any, ...] = ()
        for fn in self._before:
            head += fn(self.ctx, i)
        return (head, self.ctx.lanes[i] if self._dyn is not None else ())

    def _key(self, i: int) -> tuple[Any, ...]:
        key: tuple[Any, ...] = ()
        for fn in self._within:
            key += fn(self.ctx, i)
        return key + (i,)

    def add(self, i: int) -> None:
        if i in self._where:
            return
        b = self._bucket(i)
        insort(self.buckets.setdefault(b, []), (self._key(i), i))
        self._where[i] = b

    def discard(self, i: int) -> None:
        b = self._where.pop(i, None)
        if b is None:
            return
        lst = self.buckets[b]
        # Static keys do not change, so the entry is where it was inserted.
        del lst[bisect_left(lst, (self._key(i), i))]
        if not lst:
            del self.buckets[b]

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, i: int) -> bool:
        return i in self._where

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._where))

    def walk(self) -> Iterator[list[tuple[tuple[Any, ...], int]]]:
        """Buckets, most urgent first (their lanes' bytes left as they are now)."""
        def order(b: tuple[Any, ...]) -> tuple[Any, ...]:
            head, brokers = b
            dyn = self._dyn(self.ctx, brokers) if self._dyn is not None else ()
            return head + dyn + self.buckets[b][0][0]
        for b in sorted(self.buckets, key=order):
            yield self.buckets[b]

