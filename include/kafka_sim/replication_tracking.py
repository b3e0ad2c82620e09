"""Change tracking of the replication physics: steady in-sync traffic and the active set.

A changed partition is marked dirty; before the physics runs, its contribution to each
broker's steady (in-sync) traffic and quota recording is re-derived, and it joins the
active set when a follower or future replica of it has bytes to copy.
"""
from __future__ import annotations

from collections import deque
from operator import itemgetter

from kafka_sim.replication_quotas import FOLLOWER_QUOTA, LEADER_QUOTA
from kafka_sim.state import Partition, Replica, Topic, is_throttled

#: records produced over this many seconds give a partition's produce rate
PRODUCE_WINDOW_S = 1.0


def _changed_indices(old: object, new: object) -> set[int] | None:
    """Partition indices whose throttled status may differ between two specs (None: all)."""
    if old is new:  # a list the write left alone: its parse is the cached one
        return set()
    if old is True or new is True:
        return None if old != new else set()
    a = old if isinstance(old, frozenset) else frozenset()
    b = new if isinstance(new, frozenset) else frozenset()
    # the indices in the order the comprehension gave them (the dirty set is ordered), made in C
    return set(map(itemgetter(0), a ^ b))


class ChangeTracking:
    """Mixin of ClusterModel: what changed since the last physics step."""

    def _touch(self, p: Partition) -> None:
        """Mark a partition changed: aggregates and active set are refreshed before physics."""
        self._dirty.add(p)
        p.partition_epoch += 1
        self.state_version += 1
        topic = self.topics.get(p.topic)
        if topic is not None:
            topic.version += 1  # the server re-encodes only changed topics' metadata
        self._plan = None
        if p.frozen_hw is not None and len(p.isr) >= self._effective_min_isr(p):
            p.frozen_hw = None  # back at min ISR, whichever change brought it there
        self._note_preferred_leader(p)
        if self.touch_journal is not None:
            self.touch_journal.append(p)

    def _throttles_changed(self, topic: object, old_leader: object, old_follower: object) -> None:
        """A topic's throttled-replica lists changed: re-derive what the affected partitions record."""
        indices = _changed_indices(old_leader, topic.leader_throttled)  # type: ignore[attr-defined]
        more = _changed_indices(old_follower, topic.follower_throttled)  # type: ignore[attr-defined]
        parts = topic.partitions  # type: ignore[attr-defined]
        if indices is None or more is None:
            candidates = parts
        else:
            candidates = [parts[i] for i in indices | more if i < len(parts)]
        active = self._active
        for p in candidates:
            if p.bytes_in_per_sec > 0 or p in active:
                self._dirty.add(p)
        self._plan = None

    def _rebase(self, p: Partition) -> None:
        """Freeze the lazily grown log at the current time and re-derive its growth rate."""
        p._base_bytes = p.log_bytes()
        p._base_t = self._t
        leader_up = p.leader >= 0 and self.brokers[p.leader].alive
        rate = p.bytes_in_per_sec if leader_up else 0.0
        if rate != p._rate:  # same rate: the log's line through time is unchanged
            self._usage_changed(p)
        p._rate = rate

    def _flush_dirty(self) -> None:
        """Refresh steady traffic aggregates and the active set of changed partitions.

        Then hand every congested broker's tracking followers to the physics, so that the
        ones its link cannot carry fall behind.
        """
        while self._dirty:
            self._plan = None
            before: dict[int, tuple[float, float]] = {}
            rec_changed: set[tuple[str, int]] = set()
            for p in self._dirty:
                self._flush_one(p, before, rec_changed)
            self._dirty.clear()
            for key in rec_changed:
                self._record_rate(key)
            # only more in-sync traffic can newly overload a link
            grown = {b for b, (out, inn) in before.items()
                     if self._steady_out.get(b, 0.0) > out or self._steady_in.get(b, 0.0) > inn}
            self._relieve_congestion(grown)

    def _flush_one(self, p: Partition, before: dict[int, tuple[float, float]],
                   rec_changed: set[tuple[str, int]]) -> None:
        self._flow_cache.pop(p, None)
        self._fresh.add(p)
        self._since_plan.add(p)
        old = self._contrib.pop(p, None)
        if old is not None:
            self._drop_contrib(old, before, rec_changed)
        topic = self.topics.get(p.topic)
        if topic is None or p.index >= len(topic.partitions) or topic.partitions[p.index] is not p:
            self._active.discard(p)  # deleted topic: its contributions are gone, nothing to simulate
            return
        self._rebase(p)
        contrib, active = self._shares(p, topic)
        if contrib:
            self._add_contrib(contrib, p._rate, before, rec_changed)
            self._contrib[p] = contrib
        if active:
            self._active.add(p)
        else:
            self._active.discard(p)

    def _shares(self, p: Partition, topic: Topic) -> tuple[tuple[tuple[int, float, float, float, float], ...], bool]:
        """``p``'s in-sync traffic and quota recording per broker, and whether it has bytes to copy.

        Each share is (broker, out, in, leader quota recording, follower quota recording): the
        tracking followers' in the replica order, then the leader's.
        """
        brokers = self.brokers
        leader, index, rate = p.leader, p.index, p._rate
        leader_up = leader >= 0 and brokers[leader].alive
        spec = topic.follower_throttled
        active = False
        contrib: list[tuple[int, float, float, float, float]] = []
        reps = p._reps
        for b in p.replicas:
            r = reps[b]
            if not brokers[b].alive:  # a stopped broker neither copies nor fetches
                continue
            if r.future_log_dir is not None:
                active = True
            if b == leader or not leader_up:
                continue
            if not r.tracking:
                active = True
            elif rate > 0:
                # is_throttled spelled out: called for every follower of every changed partition
                frec = rate if spec is not None and (spec is True or (index, b) in spec) else 0.0
                contrib.append((b, 0.0, rate, 0.0, frec))
        if leader_up and rate > 0:
            followers = len(contrib)
            lrec = rate * followers if is_throttled(topic.leader_throttled, index, leader) else 0.0
            contrib.append((leader, rate * followers, rate, lrec, 0.0))
        return tuple(contrib), active

    def _add_contrib(self, contrib: tuple[tuple[int, float, float, float, float], ...], rate: float,
                     before: dict[int, tuple[float, float]], rec_changed: set[tuple[str, int]]) -> None:
        """Put a partition's shares into its brokers' sums (each broker's sums first noted in ``before``)."""
        steady_out, steady_in, steady_rec, bound = self._steady_out, self._steady_in, self._steady_rec, self._rate_bound
        for b, out, inn, lrec, frec in contrib:
            if rate > bound.get(b, 0.0):  # never lowered: an upper bound is enough
                bound[b] = rate
            was_out, was_in = steady_out.get(b, 0.0), steady_in.get(b, 0.0)
            if b not in before:
                before[b] = (was_out, was_in)
            steady_out[b] = was_out + out
            steady_in[b] = was_in + inn
            # most shares record nothing on one side: that side's sum is left alone
            if lrec:
                key = (LEADER_QUOTA, b)
                steady_rec[key] = steady_rec.get(key, 0.0) + lrec
                rec_changed.add(key)
            if frec:
                key = (FOLLOWER_QUOTA, b)
                steady_rec[key] = steady_rec.get(key, 0.0) + frec
                rec_changed.add(key)

    def _drop_contrib(self, contrib: tuple[tuple[int, float, float, float, float], ...],
                      before: dict[int, tuple[float, float]], rec_changed: set[tuple[str, int]]) -> None:
        """Take a partition's last shares out of its brokers' sums (:meth:`_add_contrib` undone)."""
        steady_out, steady_in, steady_rec = self._steady_out, self._steady_in, self._steady_rec
        for b, out, inn, lrec, frec in contrib:
            was_out, was_in = steady_out.get(b, 0.0), steady_in.get(b, 0.0)
            if b not in before:
                before[b] = (was_out, was_in)
            steady_out[b] = was_out - out
            steady_in[b] = was_in - inn
            if lrec:  # the same sums as adding -lrec
                key = (LEADER_QUOTA, b)
                steady_rec[key] = steady_rec.get(key, 0.0) - lrec
                rec_changed.add(key)
            if frec:
                key = (FOLLOWER_QUOTA, b)
                steady_rec[key] = steady_rec.get(key, 0.0) - frec
                rec_changed.add(key)

    def _relieve_congestion(self, brokers: set[int]) -> None:
        """Brokers whose link cannot carry their in-sync traffic: their followers become flows.

        A follower fetching through a saturated link gets a fair share of it; the ones
        whose partition is written faster than that share fall behind (and leave the ISR
        after replica.lag.time.max.ms), the others catch up and track again at once.
        """
        for b in brokers:
            broker = self.brokers.get(b)
            if broker is None or not broker.alive:
                continue
            cap = broker.network_bytes_per_sec * (1.0 + 1e-9)
            inbound = self._steady_in.get(b, 0.0) > cap
            outbound = self._steady_out.get(b, 0.0) > cap
            if not (inbound or outbound):
                continue
            for p in list(self._by_broker[b]):
                if p._rate <= 0 or p.leader < 0:
                    continue
                if inbound and p.leader != b:
                    self._release(p, p._reps[b])
                if outbound and p.leader == b:
                    for f, r in p._reps.items():
                        if f != b:
                            self._release(p, r)

    def _produced_congestion(self, p: Partition, nbytes: float) -> None:
        """Records produced faster than a tracking follower's link carries: it becomes a flow.

        Records produced through the API reach tracking followers as lumps
        (``_record_produced``), outside the steady write rate that ``_relieve_congestion``
        weighs; a Kafka follower fetches them through its link like any other bytes. Seen on
        Apache Kafka 4.3.1 (benchmarks/calibration_timed.py, scenario d): a follower whose
        link carried 0.5 MB/s under a 1.5 MB/s producer fell behind and left the ISR once
        ``replica.lag.time.max.ms`` had passed (Partition.getOutOfSyncReplicas), while the
        simulator kept it tracking. The produce rate is what was appended over the last second.
        """
        if p.leader < 0:
            return
        window, total = self._produced.setdefault(p, (deque(), [0.0]))
        now = self._t
        window.append((now, nbytes))
        total[0] += nbytes
        while window[0][0] <= now - PRODUCE_WINDOW_S:
            total[0] -= window.popleft()[1]
        rate = total[0] / PRODUCE_WINDOW_S
        brokers = self.brokers
        followers = [r for b, r in p._reps.items() if b != p.leader and r.tracking and brokers[b].alive]
        if not followers:
            return
        out_spare = brokers[p.leader].network_bytes_per_sec - self._steady_out.get(p.leader, 0.0)
        out_share = self._link_share(("o", p.leader), out_spare, [rate] * len(followers))
        for r in followers:
            in_spare = brokers[r.broker].network_bytes_per_sec - self._steady_in.get(r.broker, 0.0)
            if rate > min(self._link_share(("i", r.broker), in_spare, [rate]), out_share):
                self._release(p, r)

    def _link_share(self, link: tuple[str, int], spare: float, wanted: list[float]) -> float:
        """The least of what the followers ``wanted`` get on ``link`` beside the catching-up flows
        crossing it: max-min fair per partition (:mod:`kafka_sim.replication_sharing`: one fetch
        holds in-sync and reassigning partitions alike). Seen on Apache Kafka 4.3.1
        (benchmarks/calibration_timed.py, scenario h): an in-sync follower of a 1 MB/s partition
        whose 3 MB/s link carried eight copies left the ISR after 36 s.

        :param link: ("i", follower) or ("o", leader)
        :param spare: the link less its steady in-sync traffic
        :param wanted: each follower's produce rate
        """
        flows = self._plan_link_rates().get(link, [])
        # the flows' planned rates are what they take wherever they are bound; the rest is shared
        demands = sorted(flows + wanted)
        left, n = spare + 0.0, len(demands)
        for d in demands:
            if d * n > left:
                return left / n  # the fair level: every demand from here on is cut to it
            left -= d
            n -= 1
        return min(wanted)  # room for every demand

    def _plan_link_rates(self) -> dict[tuple[str, int], list[float]]:
        """Link -> the planned rates of the flows crossing it, indexed once per physics plan: a
        produce request looks up its links, it does not scan every flow of a large rehearsal."""
        plan = self._plan
        if plan is None:
            return {}
        cached = self._link_rates
        if cached is None or cached[0] is not plan:  # a plan's rates are fixed until it is dropped
            index: dict[tuple[str, int], list[float]] = {}
            for f in plan[0]:
                for key in f.resources:
                    index.setdefault(key, []).append(f.rate)
            cached = self._link_rates = (plan, index)
        return cached[1]

    def _release(self, p: Partition, r: Replica) -> None:
        if r.tracking and self.brokers[r.broker].alive:
            self._materialize(p, r)
            self._dirty.add(p)
