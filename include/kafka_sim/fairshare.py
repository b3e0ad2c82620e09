"""Max-min fair sharing of broker capacities between replication flows.

Each flow (a follower catching up, a future replica being copied) crosses a few
resources: the leader's outbound network, the follower's inbound network, the
KIP-73 leader/follower quotas when it is throttled, the broker's disk for KIP-113
copies. Kafka's quotas are per broker and every throttled fetcher shares them, so the
fair answer is progressive filling: raise every flow's rate together, freeze the flows
of whichever resource saturates first, continue with the rest.

The filling works on resources numbered 0..n-1 (:func:`fill`): the physics numbers its
resources once (``FlowPlanning``) and keeps each flow's numbers with the flow, so a plan
neither hashes resource keys per flow nor builds per-flow lists of the finite ones.
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
    ids: dict[Hashable, int] = {}
    numbered = [tuple(ids.setdefault(key, len(ids)) for key in res) for res in flows]
    cap = [math.inf] * len(ids)
    for key, r in ids.items():
        c = capacity.get(key)
        if c is not None:
            cap[r] = c
    return fill(numbered, cap, unlimited)


def fill(flows: Sequence[Sequence[int]], cap: Sequence[float], unlimited: float = math.inf) -> list[float]:
    """Max-min fair rates of flows crossing numbered resources (progressive filling).

    :param flows: for each flow, the numbers of the resources it crosses
    :param cap: capacity of every resource number in ``flows`` (inf: does not limit)
    :param unlimited: rate given to a flow no finite resource limits
    :returns: one rate per flow
    """
    rates: list[float | None] = [None] * len(flows)
    # an infinite resource stays infinite as frozen flows are taken off it: no test per flow.
    # Only the finite resources the flows cross are clamped (below): ``cap`` numbers every
    # resource of the cluster, and a re-share crosses a handful of them.
    remaining = list(cap)
    count = [0] * len(cap)
    members: dict[int, list[int]] = {}  # finite resource -> its flows, in the order first crossed
    isinf = math.isinf
    for i, res in enumerate(flows):
        for r in res:
            count[r] += 1
            m = members.get(r)
            if m is not None:
                m.append(i)
            elif not isinf(remaining[r]):
                members[r] = [i]
    for r in members:
        remaining[r] = max(0.0, float(remaining[r]))
    # the order resources are first crossed breaks ties between equal shares
    heap = [(remaining[r] / count[r], tie, r) for tie, r in enumerate(members)]
    heapq.heapify(heap)
    heappop, heappush = heapq.heappop, heapq.heappush
    # A resource's fair share only grows as flows elsewhere freeze below it (they take at
    # most its share), so a popped share is a lower bound: re-check it, re-queue if it grew.
    while heap:
        share, tie, key = heappop(heap)
        c = count[key]
        if c == 0:
            continue
        actual = max(0.0, remaining[key]) / c
        if actual > share * (1 + 1e-12) + 1e-12:
            heappush(heap, (actual, tie, key))
            continue
        for i in members[key]:
            if rates[i] is not None:
                continue
            rates[i] = actual
            for other in flows[i]:
                if other != key:
                    remaining[other] -= actual
                    count[other] -= 1
        count[key] = 0
    return [unlimited if r is None else r for r in rates]
