"""Max-min fair sharing of broker capacities between replication flows.

Each flow (a follower catching up, a future replica being copied) crosses a few
resources: the leader's outbound network, the follower's inbound network, the
KIP-73 leader/follower quotas when it is throttled, the broker's disk for KIP-113
copies. Kafka's quotas are per broker and every throttled fetcher shares them, so the
fair answer is progressive filling: raise every flow's rate together, freeze the flows
of whichever resource saturates first, continue with the rest.
"""
from __future__ import annotations

import heapq
import math
from typing import Hashable, Mapping, Sequence


def allocate(flows: Sequence[Sequence[Hashable]], capacity: Mapping[Hashable, float],
             unlimited: float = math.inf) -> list[float]:
    """Max-min fair rates for flows sharing capacitated resources.

    :param flows: for each flow, the resource keys it crosses (keys missing from
        ``capacity`` or with infinite capacity do not limit it)
    :param capacity: resource key -> bytes per second available
    :param unlimited: rate given to a flow no finite resource limits
    :returns: one rate per flow
    """
    n = len(flows)
    rates: list[float | None] = [None] * n
    remaining: dict[Hashable, float] = {}
    members: dict[Hashable, list[int]] = {}
    for i, res in enumerate(flows):
        for key in res:
            if key in members:
                members[key].append(i)
                continue
            cap = capacity.get(key)
            if cap is None or math.isinf(cap):
                continue
            remaining[key] = max(0.0, float(cap))
            members[key] = [i]
    # each flow's finite resources, found once (the filling loop visits them for every flow it freezes)
    limited = [[key for key in res if key in remaining] for res in flows]
    count = {k: len(v) for k, v in members.items()}
    order = {k: idx for idx, k in enumerate(members)}  # tie-breaker, keys need not be comparable
    heap = [(remaining[k] / count[k], order[k], k) for k in members]
    heapq.heapify(heap)
    # A resource's fair share only grows as flows elsewhere freeze below it (they take at
    # most its share), so a popped share is a lower bound: re-check it, re-queue if it grew.
    while heap:
        share, tie, key = heapq.heappop(heap)
        c = count[key]
        if c == 0:
            continue
        actual = max(0.0, remaining[key]) / c
        if actual > share * (1 + 1e-12) + 1e-12:
            heapq.heappush(heap, (actual, tie, key))
            continue
        for i in members[key]:
            if rates[i] is not None:
                continue
            rates[i] = actual
            for other in limited[i]:
                if other != key:
                    remaining[other] -= actual
                    count[other] -= 1
        count[key] = 0
    return [unlimited if r is None else r for r in rates]
