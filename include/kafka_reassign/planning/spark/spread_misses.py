"""What bounds the topic-spread pass's retries (:mod:`.spread`): the brokers each move changed, and
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
from typing import Hashable

#: moves since a replica's miss past which its retry is a full try (the union of what they changed
#: would cost about as much as the try)
MAX_SINCE = 64


@dataclass
class Miss:
    """A replica that fit nowhere: in which step, after how many moves, the swap receivers then."""

    mode: Hashable
    at: int
    swap_receivers: frozenset[int]


@dataclass
class Misses:
    """The brokers each move changed (in order) and the misses, by replica key."""

    log: list[frozenset[int]] = field(default_factory=list)
    missed: dict[tuple[str, int, int], Miss] = field(default_factory=dict)

    def changed(self, brokers: frozenset[int]) -> None:
        """A move changed ``brokers`` (its ends and the holders of its partition)."""
        self.log.append(brokers)

    def miss(self, key: tuple[str, int, int], mode: Hashable, swap_receivers: frozenset[int]) -> None:
        self.missed[key] = Miss(mode, len(self.log), swap_receivers)

    def fresh(self, key: tuple[str, int, int], broker: int, mode: Hashable) -> tuple[set[int], frozenset[int]] | None:
        """(brokers changed since the replica's miss in this ``mode``, the swap receivers then), or
        None for a full try: no such miss, its own ``broker`` changed, or too many moves since."""
        m = self.missed.get(key)
        if m is None or m.mode != mode or len(self.log) - m.at > MAX_SINCE:
            return None
        since: set[int] = set()
        for brokers in self.log[m.at:]:
            since |= brokers
        return None if broker in since else (since, m.swap_receivers)
