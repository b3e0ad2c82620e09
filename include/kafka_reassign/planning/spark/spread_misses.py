"""What bounds the topic-spread pass's retries (:mod:`.spread`): when each broker last changed, and
the crowded replicas that fit nowhere, remembered with the moves made until then.

A crowded replica that fit nowhere is tried again each sweep on every receiver, and with relays on
each receiver's largest replicas and every third broker for each (on 1.5M-replica hot-traffic
hundreds of pairs stay crowded: 318 CPU s). Whether it fits depends only on the state of brokers:
their bytes, network in, replica count and counts of each topic, and the partitions they hold. A
move changes its two ends and, through its partition, the brokers holding that partition. So when
the replica's partition did not change since it last fit nowhere (in the same step of the pass),
only a receiver (or third broker) that changed since can take it now: the retry looks at those
alone, and finds what a full try would. Its own broker matters to a swap alone (the partner comes
back to it): a swap retry is a full one when it changed; and a receiver that entered the ones a
swap looks at (the first ``SWAP_RECEIVERS`` of the order) since is looked at too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable


@dataclass
class Miss:
    """A replica that fit nowhere: in which step, after how many moves, the swap receivers then."""

    mode: Hashable
    at: int
    swap_receivers: frozenset[int]


@dataclass
class Misses:
    """The moves so far, the last move that changed each broker and each partition, and the misses
    by replica key."""

    moves: int = 0
    stamp: dict[int, int] = field(default_factory=dict)
    partitions: dict[tuple[str, int], int] = field(default_factory=dict)
    missed: dict[tuple[str, int, int], Miss] = field(default_factory=dict)

    def moved(self, brokers: Iterable[int], partition: tuple[str, int]) -> None:
        """A move of a replica of ``partition`` changed ``brokers`` (its ends and the partition's holders)."""
        self.moves += 1
        self.partitions[partition] = self.moves
        for b in brokers:
            self.stamp[b] = self.moves

    def miss(self, key: tuple[str, int, int], mode: Hashable, swap_receivers: frozenset[int]) -> None:
        self.missed[key] = Miss(mode, self.moves, swap_receivers)

    def since(self, key: tuple[str, int, int], mode: Hashable) -> Miss | None:
        """The replica's miss in this ``mode`` when its partition did not change since (None: a full try)."""
        m = self.missed.get(key)
        return None if m is None or m.mode != mode or self.partitions.get(key[:2], 0) > m.at else m

    def changed(self, b: int, m: Miss) -> bool:
        """Broker ``b`` changed since the miss ``m``."""
        return self.stamp.get(b, 0) > m.at
