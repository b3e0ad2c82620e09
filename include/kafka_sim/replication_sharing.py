"""How a saturated link is shared between in-sync followers and catching-up ones: per partition.

Kafka has no priority for in-sync replication. A follower's ReplicaFetcherThread sends one fetch
per leader holding all its partitions there, in-sync and reassigning alike
(RemoteLeaderEndPoint.buildFetch leaves a throttled partition out only while the replication
quota is exceeded). The leader fills the response partition by partition, each up to the
partition fetch size (replica.fetch.max.bytes), the whole up to replica.fetch.response.max.bytes
(ReplicaManager.readFromLog), and the incremental fetch session moves every partition that
returned data to the end of its order (FetchSession, IncrementalFetchContext), so no partition
keeps the head of the response. When the link is the bottleneck, every partition with data to
fetch therefore gets about the same share of it: a partition written faster than that share
falls behind, in sync or not, and leaves the ISR after replica.lag.time.max.ms.

The physics plans catching-up flows against the link minus the steady in-sync traffic
(:mod:`kafka_sim.replication_flows`). That is the same as the fair share as long as the link's
fair level is at or above every in-sync follower's write rate. When it may not be, the in-sync
followers crossing the link join the allocation as flows bounded by their write rate, and those
that get less are handed to the physics as flows of their own (they fall behind).

Modelled from Kafka's fetch protocol, then measured on Apache Kafka 4.3.1 with the loopback
shaped by ``tc`` (benchmarks/calibration_timed.py, scenario h: an in-sync follower of a 1 MB/s
partition on a 3 MB/s link beside eight copies left the ISR after 36-39 s). Records produced
through the API are squeezed the same way (``replication_tracking._link_share``). Across the
fetch connections of different leaders the split is per connection in reality (TCP); the model
shares per partition throughout.
"""
from __future__ import annotations

import math
from collections import Counter

from kafka_sim.fairshare import allocate, fill
from kafka_sim.state import Partition, Replica

#: an in-sync follower keeps up when it gets its write rate, within rounding
_KEEP_UP = 1.0 - 1e-9

Link = tuple[str, int]


class FetchSharing:
    """Mixin of ClusterModel: rates of a plan's flows with in-sync followers sharing saturated links."""

    def _fair_rates(self, flows: list, capacity: dict, crossing: Counter[int]) -> list[float] | None:
        """Max-min fair rates of ``flows``, or None after handing squeezed in-sync followers to the physics.

        :param flows: the plan's flows (each with ``resources`` and their numbers, ``rids``)
        :param capacity: resource -> capacity, links net of the steady in-sync traffic
        :param crossing: resource number -> how many flows cross it
        """
        followers: list[tuple[Partition, Replica, float]] = []
        for link in self._squeezed_links(capacity, crossing):
            followers.extend(self._in_sync_on(link))
        if not followers:
            keys = self._res_keys
            numbered = [math.inf] * len(keys)
            for rid in crossing:
                numbered[rid] = capacity[keys[rid]]
            return fill([f.rids for f in flows], numbered)
        resources = [f.resources for f in flows]
        capacity = dict(capacity)
        # a follower on two squeezed links (its leader's out, its own in) is one flow
        distinct = list({id(r): (p, r, rate) for p, r, rate in followers}.values())
        for p, r, rate in distinct:
            links: tuple[Link, Link] = (("o", p.leader), ("i", r.broker))
            for link in links:
                # its bytes are in the steady traffic the capacity was reduced by: give them back
                capacity[link] = capacity.get(link, self._net_capacity(link)) + rate
            capacity[("w", id(r))] = rate  # an in-sync follower fetches no more than is written
            resources.append(links + (("w", id(r)),))
        rates = allocate(resources, capacity)
        n = len(flows)
        squeezed = [(p, r) for (p, r, rate), got in zip(distinct, rates[n:]) if got < rate * _KEEP_UP]
        if not squeezed:
            return rates[:n]
        for p, r in squeezed:
            self._release(p, r)
        return None

    def _net_capacity(self, link: Link) -> float:
        """A link's capacity net of the steady in-sync traffic crossing it."""
        side, b = link
        steady = self._steady_out if side == "o" else self._steady_in
        return max(0.0, self.brokers[b].network_bytes_per_sec - steady.get(b, 0.0))

    def _squeezed_links(self, capacity: dict, crossing: Counter[int]) -> list[Link]:
        """Links whose fair level may fall under an in-sync follower's write rate.

        A saturated link's level is at least its net capacity over the flows crossing it (those
        limited elsewhere take less), so a link where that bound reaches the fastest write rate
        of its in-sync followers shares as before.
        """
        squeezed = []
        keys = self._res_keys
        for rid, count in crossing.items():
            link = keys[rid]
            if link[0] not in ("o", "i"):
                continue
            floor = capacity.get(link, 0.0) / count
            if floor >= self._rate_bound.get(link[1], 0.0):  # cheap: no scan of the broker's partitions
                continue
            if any(rate > floor for _p, _r, rate in self._in_sync_on(link)):
                squeezed.append(link)
        return squeezed

    def _in_sync_on(self, link: Link) -> list[tuple[Partition, Replica, float]]:
        """The caught-up followers fetching through ``link``, with their partitions' write rates."""
        side, b = link
        brokers = self.brokers
        out: list[tuple[Partition, Replica, float]] = []
        if not brokers[b].alive:
            return out
        for p in self._by_broker.get(b, ()):
            leader = p.leader
            if p._rate <= 0 or leader < 0 or not brokers[leader].alive:
                continue
            if side == "i" and leader != b:
                r = p._reps[b]
                if r.tracking:
                    out.append((p, r, p._rate))
            elif side == "o" and leader == b:
                out.extend((p, r, p._rate) for f, r in p._reps.items()
                           if f != b and r.tracking and brokers[f].alive)
        return out
