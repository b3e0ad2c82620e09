"""The topic-spread pass's order of receivers for a topic (:meth:`.spread.Spread.receivers`):
below even + reach for the topic, fewest of it first, then least network in, then id.

Asked once per crowded replica (137,000 times on the 3M skew snapshot, a move after most), so
nothing is made afresh per ask: the receivers by (network in, id) stay sorted through the moves
(a move changes two brokers' network in: both are taken out and put back by bisection, not the
300 re-sorted), and per topic the receivers holding some of it (most hold none) are kept up to
date by the moves.
"""
from __future__ import annotations

from bisect import bisect_left
from itertools import islice
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence, overload

if TYPE_CHECKING:
    from kafka_reassign.planning.spark.network import NetState
    from kafka_reassign.planning.spark.spread import EvenShares


class NetOrder:
    """The receivers sorted by (network in, id), kept through moves.

    :param s: the pass's state (its network in and receivers)
    """

    def __init__(self, s: NetState) -> None:
        net = s.net
        self.net = net
        self.keys = sorted((net.get(b, 0.0), b) for b in s.receivers)
        self.ids = [b for _, b in self.keys]
        self.key = {b: k for k, b in zip(self.keys, self.ids)}

    def take(self, b: int) -> None:
        """Take receiver ``b`` out before its network in changes."""
        i = bisect_left(self.keys, self.key[b])
        del self.keys[i], self.ids[i]

    def put(self, b: int) -> None:
        """Put receiver ``b`` back at its new network in."""
        k = self.key[b] = (self.net.get(b, 0.0), b)
        i = bisect_left(self.keys, k)
        self.keys.insert(i, k)
        self.ids.insert(i, b)


class ReceiverOrder:
    """The receivers' order per topic for the pass's counts (:meth:`of`), kept through moves.

    :param s: the pass's state
    :param counts: (topic, broker) -> replicas, the pass's (changed by it in place)
    :param even: the even shares
    """

    def __init__(self, s: NetState, counts: Mapping[tuple[str, int], int], even: EvenShares) -> None:
        self.s, self.counts, self.even = s, counts, even
        self._net: NetOrder | None = None  # made at the first ask
        self._held: dict[str, dict[int, int]] | None = None  # topic -> receivers holding some of it -> count

    def of(self, topic: str, reach: int) -> Sequence[int]:
        """Receivers below even + ``reach`` for the topic, fewest of it first, then least network in
        (read before the next move: the order is made as far as it is read)."""
        if self._net is None:
            self._net = NetOrder(self.s)
        even, counts, ids = self.even, self.counts, self._net.ids
        if even.equal:  # most receivers hold none of the topic: only those that do are looked up
            return Lazy(_equal_order(ids, self._held_of(topic), even.base[topic] + reach, self.s.net))
        by_count: dict[int, list[int]] = {}
        for b in ids:
            n = counts.get((topic, b), 0)
            if n < even.of(topic, b) + reach:
                by_count.setdefault(n, []).append(b)
        return [b for n in sorted(by_count) for b in by_count[n]]

    def _held_of(self, topic: str) -> dict[int, int]:
        """Receivers holding some of ``topic`` -> how many: every topic's, made in one look at the
        counts at the first ask (cheaper than each topic looking up every receiver)."""
        if self._held is None:
            self._held = {}
            receivers = self.s.receivers
            for (t, b), n in self.counts.items():
                if n and b in receivers:
                    self._held.setdefault(t, {})[b] = n
        return self._held.setdefault(topic, {})

    def before_move(self, brokers: set[int]) -> None:
        """Brokers whose network in is about to change (a move's source and receiver)."""
        if self._net is not None:
            for b in brokers & self.s.receivers:
                self._net.take(b)

    def after_move(self, topic: str, brokers: set[int]) -> None:
        """The move of a replica of ``topic`` between ``brokers`` is applied."""
        net = self._net
        held = None if self._held is None else self._held.setdefault(topic, {})  # kept: a pass moves often
        for b in brokers & self.s.receivers:
            if net is not None:
                net.put(b)
            if held is not None:
                n = self.counts.get((topic, b), 0)
                if n:
                    held[b] = n
                else:
                    held.pop(b, None)


def _equal_order(ids: list[int], held: dict[int, int], below: int, net: Mapping[int, float]) -> Iterator[int]:
    """:meth:`ReceiverOrder.of` with equal shares: the receivers holding none of the topic by
    network in, then those holding some (``held``: counts above 0) below ``below``, fewest first,
    sorted only when reached: most asks stop at one of the first, and the sort was most of an ask."""
    if 0 < below:
        yield from (b for b in ids if b not in held)
    yield from (b for _, _, b in sorted((n, net.get(b, 0.0), b) for b, n in held.items() if n < below))


class Lazy(Sequence[int]):
    """An iterator's items, made as far as they are read and kept for the next read.

    :param items: the iterator (its sources must not change while it is read)
    """

    def __init__(self, items: Iterator[int]) -> None:
        self._items, self._made = items, []  # type: tuple[Iterator[int], list[int]]

    def __iter__(self) -> Iterator[int]:
        made, i = self._made, 0
        while True:
            if i == len(made):
                nxt = next(self._items, None)
                if nxt is None:
                    return
                made.append(nxt)
            yield made[i]
            i += 1

    @overload
    def __getitem__(self, k: int) -> int: ...

    @overload
    def __getitem__(self, k: slice) -> list[int]: ...

    def __getitem__(self, k: int | slice) -> int | list[int]:
        if isinstance(k, slice) and k.step is None and (k.start or 0) >= 0 and k.stop is not None and k.stop >= 0:
            return list(islice(self, k.start, k.stop))  # a head: made only that far
        return self._all()[k]

    def __len__(self) -> int:
        return len(self._all())

    def __eq__(self, other: object) -> bool:
        return self._all() == (other._all() if isinstance(other, Lazy) else other)

    def __repr__(self) -> str:
        return f"Lazy({self._all()!r})"

    def _all(self) -> list[int]:
        for _ in self:  # not list(self): that asks len() first
            pass
        return self._made
