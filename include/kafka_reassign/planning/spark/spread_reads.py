"""What the topic-spread pass (:mod:`.spread`) reads: the crowded pairs' replicas and swap
partners from the engine, and the moves so far as replicas, each made once for the pass.

The engine's two reads run in a background thread (:class:`Reads`), one after the other, while
the driver works in pure Python (the search's moves as replicas, the redirect round): on 2 cores
the Spark executors use the core the driver leaves idle. The partners are read for every
receiver before the pass knows which it needs; it then keeps those it needs (each receiver's
candidates are its own, whichever others are asked with it), so the plan is the same.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable

from kafka_reassign.planning.spark.network import (PER_BROKER, Pool, Replica, candidates, columns, move_replicas,
                                                   search_moves)

Moved = dict[tuple[str, int], dict[int, int]]


class Reads:
    """The engine's reads for the pass, started at once and run in the background in turn.

    :param engine: SparkData or LocalData
    :param pairs: the (topic, broker) pairs above even + slack
    :param receivers: every broker that may gain a replica
    :param exclude: topics never moved
    """

    def __init__(self, engine: Any, pairs: set[tuple[str, int]], receivers: set[int], exclude: set[str]) -> None:
        self._engine, self._exclude = engine, exclude
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spread-reads")
        self._crowded: Future = self._pool.submit(engine.topic_candidates, pairs)
        side = {b: ("cold", PER_BROKER) for b in sorted(receivers)}
        self._partners: Future = self._pool.submit(engine.net_candidates, side, exclude)

    def crowded(self) -> Any:
        """The crowded pairs' replicas (:meth:`.data.SparkData.topic_candidates`)."""
        return self._crowded.result()

    def partners(self, side: dict[int, Any]) -> Any:
        """Swap partner candidates of the brokers of ``side`` (:meth:`.data.SparkData.net_candidates`)."""
        frame = self._partners.result()
        return frame[frame["broker"].isin(list(side))]

    def largest(self, side: list[int], most: int) -> Any:
        """The ``most`` largest replicas of each broker of ``side`` (read when asked: only a pass that
        needs relays pays for it)."""
        kinds = {b: ("large", most) for b in side}
        return self._pool.submit(self._engine.net_candidates, kinds, self._exclude).result()

    def close(self) -> None:
        """Wait for the reads (a Spark job left running would slow the next stage)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Reads":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Inputs:
    """The pass's inputs, the same for both of its tries (neither the replicas nor the pools
    change while it runs): read or made once, the engine's reads started first.

    :param reads: the engine's reads, started
    :param moves: the moves so far (search.MOVE_COLUMNS)
    :param pairs: the (topic, broker) pairs above even + slack
    """

    def __init__(self, reads: Reads, moves: Any, pairs: set[tuple[str, int]]) -> None:
        self.reads = reads
        self.moves, self.pairs = moves, pairs
        self.moved = search_moves(moves)
        self.onto = moves_onto(moves, self.moved)
        self.leaving = leaving_moves(moves, self.onto)
        self._crowded: dict[tuple[str, int], list[Replica]] | None = None
        self._pools: dict[int, Pool] | None = None
        self._large: dict[int, Pool] | None = None

    def crowded(self) -> dict[tuple[str, int], list[Replica]]:
        """(topic, broker) above even + slack -> its replicas there (the engine's, minus those the
        moves take off, plus the moves onto it), redirects first, then smallest."""
        if self._crowded is None:
            side = {b: None for _, b in self.pairs}
            out: dict[tuple[str, int], list[Replica]] = {}
            for b, rs in candidates(self.reads.crowded(), self.moves, side, self.moved, self.onto).items():
                for r in rs:
                    if (r.topic, b) in self.pairs:
                        out.setdefault((r.topic, b), []).append(r)
            for xs in out.values():
                xs.sort(key=lambda x: (x.via < 0, x.size, x.partition, x.pos))
            self._crowded = out
        return self._crowded

    def pools(self, order: Callable[[str], Iterable[int]]) -> dict[int, Pool]:
        """Swap partners on every receiver a crowded topic may go to.

        :param order: a topic's receivers (:meth:`.spread.Spread.receivers`, at the slack's reach)
        """
        if self._pools is None:
            side = self._side(order)
            found = candidates(self.reads.partners(side), self.moves, side, self.moved, self.onto)
            self._pools = {b: Pool(rs) for b, rs in found.items()}
        return self._pools

    def large(self, order: Callable[[str], Iterable[int]], most: int) -> dict[int, Pool]:
        """The ``most`` largest replicas (and the moves onto it) of every receiver a crowded topic
        may go to: the replicas that make disk room for a relay (:meth:`.spread.Spread.relay`).

        :param order: as :meth:`pools`
        """
        if self._large is None:
            side = self._side(order)
            found = candidates(self.reads.largest(list(side), most), self.moves, side, self.moved, self.onto)
            self._large = {b: Pool(rs) for b, rs in found.items()}
        return self._large

    def _side(self, order: Callable[[str], Iterable[int]]) -> dict[int, None]:
        """Every receiver of a crowded topic, by id."""
        topics = {tp for tp, _ in self.crowded()}
        return {b: None for b in sorted({b for tp in topics for b in order(tp)})}


def moves_onto(moves: Any, moved: Moved) -> dict[int, list[Replica]]:
    """Receiver -> the moves onto it, each as its replica there (:func:`.network.move_replicas`).

    :param moved: :func:`.network.search_moves` of ``moves``
    """
    out: dict[int, list[Replica]] = {}
    for r in move_replicas(moves, moved):
        out.setdefault(r.broker, []).append(r)
    return out


def leaving_moves(moves: Any, onto: dict[int, list[Replica]]) -> dict[int, Pool]:
    """Source broker -> the moves leaving it (each as its replica on the receiver), by size.

    :param onto: :func:`moves_onto` of ``moves``
    """
    src = columns(moves, ("src",))[0]
    out: dict[int, list[Replica]] = {}
    for rs in onto.values():
        for r in rs:
            out.setdefault(src[r.via], []).append(r)
    return {a: Pool(rs) for a, rs in out.items()}
