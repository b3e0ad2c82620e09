"""The flows of a plan patched between full plans, found by partition and by resource.

With a re-plan quantum most events touch a handful of flows among thousands in flight: a
copy that caught up leaves the plan, a quota that changed mode re-shares the flows crossing
it. Walking every flow to find those was most of a 100,000-move rehearsal's physics; the
index answers both in the size of what changed. Flows come out in plan order (their number
in the plan), so the fair share's tie-breaks are taken in the order a walk over the plan's
list would take them. What a resource's flows use is summed once and then kept through
re-shares: a re-share reads what the others leave without walking them.
"""
from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from kafka_sim.replication_flows import Flow
    from kafka_sim.state import Partition

_IN_PLAN_ORDER = attrgetter("n")


class FlowIndex:
    """The live flows of one plan: all of them, per partition, per resource number.

    :param flows: the plan's flows, in plan order (each is numbered here)
    """

    __slots__ = ("live", "by_rid", "by_part", "load")

    def __init__(self, flows: Iterable[Flow]) -> None:
        self.live: dict[int, Flow] = {}
        self.by_rid: dict[int, dict[int, Flow]] = {}
        self.by_part: dict[Partition, list[Flow]] = {}
        # per resource, the sum of its live flows' rates, summed when a re-share first asks and kept
        # through re-rates; a drop forgets it (a flow finished at once has its rate zeroed first)
        self.load: dict[int, float] = {}
        for n, f in enumerate(flows):
            f.n = n
            k = id(f)
            self.live[k] = f
            for rid in f.rids:
                members = self.by_rid.get(rid)
                if members is None:
                    members = self.by_rid[rid] = {}
                members[k] = f
            self.by_part.setdefault(f.partition, []).append(f)

    def used(self, rid: int) -> float:
        """The rates of the live flows crossing ``rid``, summed."""
        used = self.load.get(rid)
        if used is None:
            used = 0.0
            for f in self.by_rid[rid].values():  # in plan order
                used += f.rate
            self.load[rid] = used
        return used

    def rerate(self, f: Flow, rate: float) -> None:
        """Count ``f`` at ``rate`` from now on; called before its rate changes."""
        change = rate - f.rate
        if change:
            load = self.load
            for rid in f.rids:
                if rid in load:
                    load[rid] += change

    def drop(self, partitions: Iterable[Partition]) -> list[Flow]:
        """Take the flows of ``partitions`` out of the plan; returns them in plan order."""
        out: list[Flow] = []
        for p in partitions:
            for f in self.by_part.pop(p, ()):
                k = id(f)
                del self.live[k]
                for rid in f.rids:
                    del self.by_rid[rid][k]
                    self.load.pop(rid, None)
                out.append(f)
        out.sort(key=_IN_PLAN_ORDER)
        return out

    def crossing(self, rids: Iterable[int]) -> list[Flow]:
        """The live flows crossing any of ``rids``, in plan order."""
        found: dict[int, Flow] = {}
        for rid in rids:
            members = self.by_rid.get(rid)
            if members:
                found.update(members)
        return sorted(found.values(), key=_IN_PLAN_ORDER)

    def flows(self) -> list[Flow]:
        """Every live flow, in plan order."""
        return list(self.live.values())
