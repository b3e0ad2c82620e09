"""What the physics does between full plans when it runs with a re-plan quantum (a rehearsal's).

A full plan shares every rate in flight anew (:meth:`FlowPlanning._make_plan`). With
``replan_quantum`` > 0, until that many virtual seconds have passed since the last one, an event
changes only what it must:

* a copy that caught up leaves the plan and the others keep their rates (:meth:`_patched`);
* a quota that changed mode (spent, or back under its bound) re-shares only the flows crossing
  it, within what the others leave of every resource they cross (:meth:`_reshared`).

Kept rates fit every capacity, so the approximation is only that capacity freed by an event
waits for the next full plan (at most the quantum) to be shared out. docs/SIMULATOR.md, *Cost*.
"""
from __future__ import annotations

import heapq
import math

from kafka_sim.fairshare import fill
from kafka_sim.flow_index import FlowIndex
from kafka_sim.model_base import CATCH_UP_EPS
from kafka_sim.replication_flows import Flow, Plan, bring_to


class QuantumPatches:
    """Mixin of ClusterModel: plans patched between full plans (``replan_quantum``)."""

    def _quantized(self) -> bool:
        """Whether the physics runs with a re-plan quantum (patched plans, bytes integrated when read)."""
        return self.replan_quantum > 0 and not self.replan_all

    def _patched(self, plan: Plan) -> Plan | None:
        """The plan without the flows of partitions that changed, the others at their rates; None
        when a changed partition still has flows (its rates must be shared anew).

        Used with ``replan_quantum`` only: nearly every event of a large rehearsal is a copy
        catching up, and each full plan shares the rates of every flow in flight anew. Kept
        rates fit every capacity (flows only left it; the in-sync traffic the new replica adds
        is its partition's write rate), so the copies still in flight run on, at or a little off
        their fair share, until the next full plan; a quota that changes mode meanwhile still
        ends the plan at its event. Costs what changed, not the flows in flight: the next
        catch-up comes from the plan's heap, and only the quotas the changed flows crossed
        (or whose meter moved) are asked again.
        """
        flows, _event, lagging, kept = plan
        changed = self._since_plan
        if not changed:
            return self._reshared(plan)
        for p in changed:
            if p in self._active:
                fl = self._flow_cache.get(p)
                if fl is None:
                    fl = self._flow_cache[p] = self._partition_flows(p)
                if fl:
                    return None
        touched = self._course_changed
        index = kept.index
        assert index is not None  # a patched plan is a quantized one
        for f in index.drop(changed):
            f.at = math.nan  # its heap entry is void
            for key in f.recorded:
                self._flow_rec[key] -= f.rate * f.fetched
                self._record_rate(key)
        kept_flows = index.flows()
        heap = kept.heap
        while heap and not heap[0][2].at == heap[0][0]:
            heapq.heappop(heap)
        now = self._t
        event = heap[0][0] if heap else math.inf
        lag = [entry for entry in lagging if entry[0] not in changed]
        if lag:
            event = min(event, max(now, min(d for _p, _r, d in lag)), self._reaches_hw(kept_flows, lag))
        patched = kept.again(event)
        first = min(event, self._due_quota_events(patched, touched))
        if first <= now:
            return None
        self._since_plan = set()
        self._course_changed = set()
        self._lazy_flows = kept_flows
        self._last_kept = patched
        return kept_flows, first, lag, patched

    def _reshared(self, plan: Plan) -> Plan | None:
        """The plan after quotas changed mode and nothing else: their flows shared anew, the others kept.

        Most full plans of a large rehearsal followed a quota that was spent or recovered (780 of
        1,299 at 20,000 moves on 300 brokers). Here the flows crossing a quota whose capacity
        changed get max-min fair rates within what the other flows leave of each resource they
        cross; every other flow keeps its rate. None (a full plan) when ISR members lag, a
        KIP-113 copy follows another flow's rate, a link might squeeze in-sync followers, or an
        event is due at once.
        """
        flows, _event, lagging, kept = plan
        if lagging or kept.follows:
            return None
        changed = self._changed_capacities(plan)
        if not changed:
            return None
        ids = self._res_ids
        index = kept.index
        assert index is not None  # a patched plan is a quantized one
        moving = index.crossing({ids[key] for key in changed})
        cap = dict(kept.cap)
        cap.update(changed)
        rates = self._residual_rates(index, moving, cap)
        if rates is None:
            return None
        now = self._t
        bring_to(moving, now)
        gaps = [f.partition.log_bytes() - f.replica._bytes if f.kind == 0
                else f.replica.exact_bytes() - f.replica.future_bytes for f in moving]
        if min(gaps, default=math.inf) <= CATCH_UP_EPS:
            return None  # one catches up now: a full plan settles it
        heap = kept.heap
        touched = set(changed) | self._course_changed
        for f, rate, gap in zip(moving, rates, gaps):
            if f.recorded and rate != f.rate:
                for key in f.recorded:
                    self._flow_rec[key] += (rate - f.rate) * f.fetched
                    self._record_rate(key)
                touched.update(f.recorded)
            index.rerate(f, rate)
            f.rate = rate
            net = rate - f.grow
            at = now + gap / net if net > 0 else math.inf
            if at != f.at:
                f.at = at
                if at < math.inf:
                    heapq.heappush(heap, (at, kept.seq, f))
                    kept.seq += 1
        while heap and not heap[0][2].at == heap[0][0]:
            heapq.heappop(heap)
        event = heap[0][0] if heap else math.inf
        patched = kept.again(event, cap)
        first = min(event, self._due_quota_events(patched, touched))
        if first <= now:
            return None
        self._course_changed = set()
        self._last_kept = patched
        return flows, first, lagging, patched

    def _residual_rates(self, index: FlowIndex, moving: list[Flow], cap: dict) -> list[float] | None:
        """Max-min fair rates of ``moving`` within what the other flows leave of ``cap``; None when a
        link they cross might squeeze in-sync followers (:meth:`FetchSharing._squeezed_links`)."""
        keys = self._res_keys
        theirs: dict[int, float] = {}  # resource -> the moving flows' rates on it
        for f in moving:
            rate = f.rate
            for rid in f.rids:
                theirs[rid] = theirs.get(rid, 0.0) + rate
        left: dict[int, float] = {}
        count: dict[int, int] = {}
        for rid, own in theirs.items():
            others = index.used(rid) - own
            left[rid] = cap[keys[rid]] - (others if others > 0.0 else 0.0)
            count[rid] = len(index.by_rid[rid])
        for rid in theirs:
            kind, b = keys[rid]
            if kind in ("o", "i") and cap[keys[rid]] / count[rid] < self._rate_bound.get(b, 0.0):
                return None
        numbered = [math.inf] * len(keys)
        for rid, value in left.items():
            numbered[rid] = value if math.isinf(value) else max(0.0, value)
        return fill([f.rids for f in moving], numbered)
