"""What bounds the topic-spread pass's retries (:mod:`.spread`): when each broker last changed, and
the crowded replicas that fit nowhere, remembered with the moves made until then.

A crowded replica that fit nowhere is tried again each sweep on every receiver, and with relays on
each receiver's largest replicas and every third broker for each (on 1.5M-replica hot-traffic
hundreds of pairs stay crowded: 318 CPU s). Whether it fits depends only on the state of brokers:
their bytes, network in, replica count and counts of each topic, and the partitions they hold. A
move changes its two ends and, through its partition, the brokers holding that partition. So when
the replica's own broker did not change since it last fit nowhere (in the same step of the pass),
only a receiver (or third broker) that changed since can take it now: the retry looks at those
alone, and finds what a full try would. The receivers a swap looks at (the first
``SWAP_RECEIVERS`` of the order) are the exception: one that entered them since is looked at too.
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
    """The moves so far, the last move that changed each broker, and the misses by replica key."""

    moves: int = 0
    stamp: dict[int, int] = field(default_factory=dict)
    missed: dict[tuple[str, int, int], Miss] = field(default_factory=dict)

    def moved(self, brokers: Iterable[int]) -> None:
        """A move changed ``brokers`` (its ends and the holders of its partition)."""
        self.moves += 1
        for b in brokers:
            self.stamp[b] = self.moves

    def miss(self, key: tuple[str, int, int], mode: Hashable, swap_receivers: frozenset[int]) -> None:
        self.missed[key] = Miss(mode, self.moves, swap_receivers)

    def since(self, key: tuple[str, int, int], broker: int, mode: Hashable) -> Miss | None:
        """The replica's miss in this ``mode`` when its own ``broker`` did not change since (None: a
        full try)."""
        m = self.missed.get(key)
        return None if m is None or m.mode != mode or self.changed(broker, m) else m

    def changed(self, b: int, m: Miss) -> bool:
        """Broker ``b`` changed since the miss ``m``."""
        return self.stamp.get(b, 0) > m.at
