"""Replication physics: followers fetching, future replicas copying, the ISR, leadership.
"""
from __future__ import annotations

import bisect
import math
from typing import Iterable

from kafka_sim.fairshare import allocate
from kafka_sim.state import _CATCH_UP_EPS, _MAX_SUBSTEPS, Partition, Replica, _throttled


class _Flow:
    """One transfer in a physics step."""

    __slots__ = ("kind", "partition", "replica", "resources", "gap", "grow", "rate")

    def __init__(self, kind: int, partition: Partition, replica: Replica, resources: tuple, gap: float,
                 grow: float) -> None:
        self.kind = kind  # 0 follower fetch, 1 future replica copy
        self.partition = partition
        self.replica = replica
        self.resources = resources
        self.gap = gap
        self.grow = grow
        self.rate = 0.0




class Replication:
    """Mixin of ClusterModel: advances replication in simulated time."""

    # ------------------------------------------------------------ physics
    def _refresh_rates(self) -> None:
        """Cache the three quota rates of every broker (inf = unthrottled)."""
        for bid in self.brokers:
            vals = []
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                         "replica.alter.log.dirs.io.max.bytes.per.second"):
                v = self.configs.long_value(bid, name)
                vals.append(math.inf if v >= 9223372036854775807 else float(v))
            self._rates[bid] = (vals[0], vals[1], vals[2])
        self._plan = None

    def _lag_max(self, broker: int) -> float:
        return self.configs.long_value(broker, "replica.lag.time.max.ms") / 1000.0

    def _touch(self, p: Partition) -> None:
        """Mark a partition changed: aggregates and active set are refreshed before physics."""
        self._dirty.add(p)
        p.partition_epoch += 1
        self.state_version += 1
        self._plan = None

    def _rebase(self, p: Partition) -> None:
        """Freeze the lazily grown log at the current time and re-derive its growth rate."""
        p._base_bytes = p.log_bytes()
        p._base_t = self._t
        leader_up = p.leader >= 0 and self.brokers[p.leader].alive
        p._rate = p.bytes_in_per_sec if leader_up else 0.0

    def _flush_dirty(self) -> None:
        """Refresh in-sync traffic aggregates and the active set of changed partitions."""
        if not self._dirty:
            return
        self._plan = None
        brokers = self.brokers
        for p in self._dirty:
            old = self._contrib.pop(p, ())
            for b, out, inn in old:
                self._steady_out[b] = self._steady_out.get(b, 0.0) - out
                self._steady_in[b] = self._steady_in.get(b, 0.0) - inn
            topic = self.topics.get(p.topic)
            exists = topic is not None and p.index < len(topic.partitions) and topic.partitions[p.index] is p
            if not exists:  # deleted topic: its contributions are gone, nothing to simulate
                self._active.discard(p)
                continue
            self._rebase(p)
            leader_up = p.leader >= 0 and brokers[p.leader].alive
            active = False
            contrib: list[tuple[int, float, float]] = []
            rate = p._rate
            followers = 0
            for b in p.replicas:
                r = p._reps[b]
                alive = brokers[b].alive
                if r.future_log_dir is not None and alive:
                    active = True
                if b == p.leader:
                    continue
                if r.tracking and alive and leader_up:
                    if rate > 0:
                        contrib.append((b, 0.0, rate))
                        followers += 1
                elif alive and leader_up:
                    active = True
            if leader_up and rate > 0:
                contrib.append((p.leader, rate * followers, rate))
            for b, out, inn in contrib:
                self._steady_out[b] = self._steady_out.get(b, 0.0) + out
                self._steady_in[b] = self._steady_in.get(b, 0.0) + inn
            if contrib:
                self._contrib[p] = tuple(contrib)
            if active:
                self._active.add(p)
            else:
                self._active.discard(p)
        self._dirty.clear()

    def _collect_flows(self) -> list[_Flow]:
        brokers = self.brokers
        flows: list[_Flow] = []
        follow_of: dict[int, _Flow] = {}
        futures: list[_Flow] = []
        for p in self._active:
            topic = self.topics[p.topic]
            leader = p.leader
            leader_up = leader >= 0 and brokers[leader].alive
            log = p.log_bytes()
            for b in p.replicas:
                r = p._reps[b]
                if not brokers[b].alive:
                    continue
                if b != leader and not r.tracking and leader_up:
                    res: list = [("o", leader), ("i", b)]
                    if b not in p.isr:  # KAFKA-4313: replicas in the ISR are never throttled
                        if _throttled(topic.leader_throttled, p.index, leader):
                            res.append(("lt", leader))
                        if _throttled(topic.follower_throttled, p.index, b):
                            res.append(("ft", b))
                    f = _Flow(0, p, r, tuple(res), max(0.0, log - r._bytes), p._rate)
                    flows.append(f)
                    follow_of[id(r)] = f
                if r.future_log_dir is not None:
                    src = r.exact_bytes()
                    f = _Flow(1, p, r, (("d", b), ("a", b)), max(0.0, src - r.future_bytes),
                              p._rate if r.tracking else 0.0)
                    futures.append(f)
        for f in futures:
            src_flow = follow_of.get(id(f.replica))
            if src_flow is not None:
                f.grow = -1.0  # resolved after allocation: follows the current replica's fetch rate
        return flows + futures

    def _capacities(self, flows: list[_Flow]) -> dict:
        cap: dict = {}
        for f in flows:
            for key in f.resources:
                if key in cap:
                    continue
                kind, b = key
                broker = self.brokers[b]
                if kind == "o":
                    cap[key] = max(0.0, broker.network_bytes_per_sec - self._steady_out.get(b, 0.0))
                elif kind == "i":
                    cap[key] = max(0.0, broker.network_bytes_per_sec - self._steady_in.get(b, 0.0))
                elif kind == "lt":
                    cap[key] = self._rates[b][0]
                elif kind == "ft":
                    cap[key] = self._rates[b][1]
                elif kind == "a":
                    cap[key] = self._rates[b][2]
                elif kind == "d":
                    cap[key] = broker.disk_bytes_per_sec
        return cap

    def _make_plan(self) -> tuple[list[_Flow], float, list[tuple[Partition, Replica, float]]]:
        """Rates of every flow and the next event time; valid until something changes.

        Between events (a flow finishing, an ISR lag deadline) every rate is constant, so
        ticks only integrate bytes; any state or config change drops the plan.
        """
        flows = self._collect_flows()
        rates = allocate([f.resources for f in flows], self._capacities(flows))
        follow_rate = {id(f.replica): r for f, r in zip(flows, rates) if f.kind == 0}
        now = self._t
        event = math.inf
        for f, rate in zip(flows, rates):
            f.rate = rate
            if f.grow < 0:
                f.grow = follow_rate.get(id(f.replica), 0.0)
            net = rate - f.grow
            if f.gap <= _CATCH_UP_EPS:
                event = now
            elif net > 0:
                event = min(event, now + f.gap / net)
        # ISR members that stopped being caught up leave after replica.lag.time.max.ms
        lagging: list[tuple[Partition, Replica, float]] = []
        for p in self._active:
            if p.leader < 0 or len(p.isr) < 2:
                continue  # the ISR never shrinks below the leader itself
            for b in p.isr:
                r = p._reps.get(b)
                if r is not None and b != p.leader and not r.tracking and self.brokers[b].alive:
                    deadline = r.caught_up_at + self._lag_max(p.leader)
                    lagging.append((p, r, deadline))
                    event = min(event, max(now, deadline))
        return flows, event, lagging

    def _run(self, until: float) -> None:
        """Advance the physics from ``self._t`` to ``until``, event by event."""
        self._flush_dirty()
        steps = 0
        first = True
        # one pass even for zero elapsed time, so empty partitions finish their moves at once
        while self._t < until or first:
            first = False
            if not self._active:
                self._t = max(self._t, until)
                self._plan = None
                break
            if self._plan is None:
                self._plan = self._make_plan()
            flows, event_at, lagging = self._plan
            steps += 1
            forced = steps > _MAX_SUBSTEPS  # too many events in one call: finish in one step
            stop_at = until if forced else min(until, event_at)
            dt = max(0.0, stop_at - self._t)
            if dt > 0:
                for f in flows:
                    if f.kind == 0:
                        f.replica._bytes += f.rate * dt
                    else:
                        f.replica.future_bytes += f.rate * dt
                self._t = stop_at
            if self._t >= event_at or forced:
                self._settle(flows, lagging)
                self._plan = None
                self._flush_dirty()

    def _settle(self, flows: list[_Flow], lagging: list[tuple[Partition, Replica, float]]) -> None:
        """At an event: clamp copies to their source, finish caught-up flows, expire lagging ISR members."""
        finished: list[_Flow] = []
        for f in flows:
            r = f.replica
            if f.kind == 0:
                target = f.partition.log_bytes()
                if target - r._bytes <= _CATCH_UP_EPS:
                    r._bytes = target
                    finished.append(f)
            else:
                src = r.exact_bytes()
                if src - r.future_bytes <= _CATCH_UP_EPS:
                    r.future_bytes = src
                    finished.append(f)
        for f in finished:
            if f.kind == 0:
                self._caught_up(f.partition, f.replica)
        for f in finished:
            r = f.replica
            if f.kind == 1 and r.future_log_dir is not None and f.partition._reps.get(r.broker) is r:
                if r.exact_bytes() - r.future_bytes <= _CATCH_UP_EPS:
                    self._swap_future(f.partition, r)
        for p, r, deadline in lagging:
            if self._t >= deadline and not r.tracking and r.broker in p.isr and len(p.isr) > 1:
                p.isr.remove(r.broker)
                self._touch(p)

    def _caught_up(self, p: Partition, r: Replica) -> None:
        """A follower reached the leader's log end: it tracks the leader and joins the ISR."""
        r.tracking = True
        r._bytes = 0.0
        r.caught_up_at = self._t
        if r.broker not in p.isr and self.brokers[r.broker].alive and p.leader >= 0:
            p.isr.append(r.broker)
        self._touch(p)
        self._maybe_complete(p)

    def _swap_future(self, p: Partition, r: Replica) -> None:
        """KIP-113: the future replica caught up; it replaces the current one in its dir."""
        r.log_dir = r.future_log_dir  # type: ignore[assignment]
        r.future_log_dir = None
        r.future_bytes = 0.0
        self._touch(p)

    # ------------------------------------------------------------ leadership
    def _first_live_isr(self, p: Partition, among: Iterable[int] | None = None) -> int:
        isr = set(p.isr)
        for b in (among if among is not None else p.replicas):
            if b in isr and self.brokers[b].alive and b in p._reps:
                return b
        return -1

    def _change_leader(self, p: Partition, new: int) -> None:
        """Make ``new`` the leader (-1: none), bump the epoch; the log becomes the new leader's."""
        if new == p.leader:
            return
        self._rebase(p)
        if new >= 0:
            r = p._reps[new]
            if not r.tracking:
                self._truncate(p, r._bytes)
                r.tracking = True
                r._bytes = 0.0
                r.caught_up_at = self._t
        p.leader = new
        p.leader_epoch += 1
        self._rebase(p)
        self._touch(p)

    def _truncate(self, p: Partition, nbytes: float) -> None:
        """The log becomes the first ``nbytes`` bytes (a shorter replica became leader)."""
        if nbytes < p._base_bytes:
            p._base_bytes = nbytes
            if p._rec_pos:
                cut = bisect.bisect_right(p._rec_pos, nbytes + _CATCH_UP_EPS)
                del p._rec_base[cut:], p._rec_end[cut:], p._rec_pos[cut:], p._rec_data[cut:], p._rec_maxts[cut:]
            p.leo = p._rec_end[-1] if p._rec_end else 0
            for r in p._reps.values():
                if not r.tracking and r._bytes > nbytes:
                    r._bytes = nbytes
                if r.future_log_dir is not None and r.future_bytes > nbytes:
                    r.future_bytes = nbytes

    def _materialize(self, p: Partition, r: Replica) -> None:
        """Give a tracking replica its own byte count (it stops following the leader)."""
        if r.tracking:
            r._bytes = p.log_bytes()
            r.tracking = False
            r.caught_up_at = self._t

