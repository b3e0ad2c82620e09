"""Watching a simulated cluster while a rehearsal runs: what moves, is copied, stays in sync.

Everything is measured from the cluster's side (the simulator's own state, not the executor's
view). :func:`virtual_sleep` is the rehearsal's ``sleep``: it moves the simulated clock and
observes the cluster at every sub-step.
"""
from __future__ import annotations

from typing import Any, Callable

#: Points kept in the report's timeline.
TIMELINE_POINTS = 60
#: The raw timeline is thinned to every other point when it holds this many times the points kept.
_TIMELINE_RAW = 4
#: Shortest virtual sleep (simulated seconds).
MIN_SLEEP = 1e-6

Key = tuple[str, int]
#: a move's brokers, as the peaks count them: (receivers adding a replica, the leader sending)
Lanes = tuple[tuple[int, ...], int]


class ClusterWatch:
    """Observes a simulated cluster between polls: what is moving, copied, in sync.

    It reads only what changed: the model lists every partition it changes in a journal (its
    ``touch_journal``: a reassignment started or completed, an ISR shrunk or grew, a leader
    moved, a future replica created or swapped in), which each observation drains. So a look
    costs what changed since the last one, not the moves in flight, and an ISR change of any
    of the plan's partitions is seen, moving or not. Bytes copied are summed over the moves in
    flight only for a timeline point, at most :data:`_TIMELINE_RAW` x :data:`TIMELINE_POINTS`
    times a run.

    :param model: the simulator's ClusterModel
    :param plan_keys: the plan's partitions (their ISR is watched)
    :param dir_keys: the plan's partitions with log dirs named (KIP-113 moves are watched too)
    """

    def __init__(self, model: Any, plan_keys: set[Key], dir_keys: set[Key] | None = None) -> None:
        self.model = model
        self.plan_keys = plan_keys
        self.dir_keys = set(dir_keys or ())
        self.first_submit: float | None = None
        self.last_done: float | None = None
        self.moving_since: dict[Key, float] = {}
        self.moving_total: dict[Key, float] = {}
        self.copied_done = 0.0  # bytes of the new copies of moves that ended
        self.timeline: list[list[float]] = []
        self.peak: dict[int, dict[str, int]] = {}
        self.urp_peak = 0
        self.risks: list[dict[str, Any]] = []
        self._risk_seen: set[tuple[str, int, str]] = set()
        self._isr0: dict[Key, set[int]] = {}
        self._min_isr: dict[str, int] = {}
        self._prev_t: float | None = None
        self._lanes: dict[Key, Lanes] = {}  # moves in flight -> the brokers counted for them
        self._dirs: dict[Key, tuple[int, ...]] = {}  # KIP-113 moves in flight -> brokers with a future replica
        self._counts: dict[str, dict[int, int]] = {"in": {}, "out": {}}
        self._urp: set[Key] = set()
        self._sample_every = 0.0  # simulated seconds between timeline points (doubles as it thins)
        self._journal: list[Any] = []
        with model.lock:
            for key in plan_keys:
                p = model.partition(*key)
                if p is not None:
                    self._isr0[key] = set(p.isr)
                    self._journal.append(p)  # the first look judges every partition of the plan
            # moves in flight already (not the plan's): watched too, as the listing would show them
            self._journal.extend(p for t, i, *_ in model.list_reassignments(None)
                                 if (t, i) not in plan_keys and (p := model.partition(t, i)) is not None)
            model.touch_journal = self._journal

    def observe(self) -> None:
        """Record what changed in the cluster since the last look (called at every sub-step of a virtual wait)."""
        m = self.model
        with m.lock:
            now = m.sim_time()
            changed, self._journal[:] = dict.fromkeys(self._journal), []
            # A move that ended since the previous look: count the middle.
            done_at = now if self._prev_t is None else (self._prev_t + now) / 2.0
            for p in changed:
                self._look(p, now, done_at)
            self.urp_peak = max(self.urp_peak, len(self._urp))
            self._sample(now)
            self._prev_t = now

    def close(self) -> None:
        """Stop the model's journal."""
        with self.model.lock:
            self.model.touch_journal = None

    def _look(self, p: Any, now: float, done_at: float) -> None:
        """One changed partition: its move started, goes on or ended; its ISR."""
        key = (p.topic, p.index)
        lanes = (tuple(p.adding), p.leader) if p.in_flight else None
        dirs = tuple(b for b in p.replicas if (r := p.replica(b)) is not None
                     and r.future_log_dir is not None) if key in self.dir_keys else ()
        old, old_dirs = self._lanes.get(key), self._dirs.get(key, ())
        # a copy that ended (its step finished, or the next step adds another broker) holds the whole log
        ended = (set(old[0]) - set(lanes[0] if lanes else ()) if old else set()) | (set(old_dirs) - set(dirs))
        self.copied_done += float(p.log_bytes()) * len(ended)
        if old != lanes:
            self._count(old, -1)
            self._count(lanes, +1)
        _put(self._lanes, key, lanes)
        _put(self._dirs, key, dirs or None)
        if lanes or dirs:
            if self.first_submit is None:
                self.first_submit = now
            self.moving_since.setdefault(key, now)
        elif key in self.moving_since:
            self.moving_total[key] = self.moving_total.get(key, 0.0) + done_at - self.moving_since.pop(key)
            self.last_done = done_at
        if key in self.plan_keys or key in self.moving_since:
            self._check_isr(p, key, now)
        else:
            self._urp.discard(key)

    def _count(self, lanes: Lanes | None, sign: int) -> None:
        """Count a move in flight on its brokers (+1) or take it off (-1); the peaks follow."""
        if lanes is None:
            return
        adding, leader = lanes
        sides = [("in", b) for b in adding] + ([("out", leader)] if adding and leader >= 0 else [])
        for side, b in sides:
            counts = self._counts[side]
            n = counts[b] = counts.get(b, 0) + sign
            peak = self.peak.setdefault(b, {"in": 0, "out": 0})
            if n > peak[side]:
                peak[side] = n

    def _copying(self) -> float:
        """Bytes the new copies in flight hold now."""
        m, total = self.model, 0.0
        for (topic, index), (adding, _leader) in self._lanes.items():
            p = m.partition(topic, index)
            for b in adding:
                r = p.replica(b) if p is not None else None
                total += float(r.exact_bytes()) if r is not None else 0.0
        for (topic, index), brokers in self._dirs.items():
            p = m.partition(topic, index)
            for b in brokers:
                r = p.replica(b) if p is not None else None
                total += float(r.future_bytes) if r is not None else 0.0
        return total

    def _sample(self, now: float) -> None:
        """A timeline point when one is due, and when the last move in flight has just ended. The
        raw timeline is thinned to every other point when full, and its spacing doubled."""
        if self.first_submit is None:
            return
        since = now - self.first_submit
        idle = not self._lanes and not self._dirs
        ended = idle and (not self.timeline or self.timeline[-1][1] != self.copied_done)
        if not ended and self.timeline and since - self.timeline[-1][0] < self._sample_every:
            return
        if len(self.timeline) >= _TIMELINE_RAW * TIMELINE_POINTS:
            self.timeline = self.timeline[::2]
            self._sample_every = max(2.0 * self._sample_every, self.timeline[-1][0] / len(self.timeline))
        self.timeline.append([since, self.copied_done + (0.0 if idle else self._copying())])

    def _check_isr(self, p: Any, key: Key, now: float) -> None:
        """A changed partition's ISR: members lost, below min.insync.replicas, under-replicated."""
        isr = set(p.isr)
        if len(isr) < len(p.replicas):
            self._urp.add(key)
        else:
            self._urp.discard(key)
        lost = (self._isr0.get(key, set()) & set(p.replicas)) - isr - set(p.removing)
        if lost:
            self._risk(key, f"replica(s) {sorted(lost)} left the ISR", now)
        min_isr = self._min_isr.get(key[0])
        if min_isr is None:
            min_isr = self._min_isr[key[0]] = self.model.min_insync_replicas(key[0])
        if len(isr) < min_isr:
            self._risk(key, f"ISR {sorted(isr)} below min.insync.replicas={min_isr} (acks=all writes fail)", now)
        if key not in self.moving_since:
            self._isr0[key] = isr

    def _risk(self, key: Key, what: str, now: float) -> None:
        tag = (key[0], key[1], what.split(" ")[0])
        if tag in self._risk_seen:
            return
        self._risk_seen.add(tag)
        self.risks.append({"partition": f"{key[0]}-{key[1]}", "what": what,
                           "at": round(now - (self.first_submit or now), 3)})

    def moving_seconds(self) -> float | None:
        if self.first_submit is None:
            return 0.0
        if self.moving_since or self.last_done is None:
            return None
        return self.last_done - self.first_submit


def _put(d: dict, key: Key, value: Any) -> None:
    """Set ``d[key]``, or drop it for None."""
    if value is None:
        d.pop(key, None)
    else:
        d[key] = value


def downsample_timeline(points: list[list[float]], n: int = TIMELINE_POINTS) -> list[list[float]]:
    """At most ``n`` evenly spaced [seconds, bytes] points of ``points`` (rounded), first and last kept."""
    if len(points) <= n:
        return [[round(t, 3), round(b)] for t, b in points]
    step = (len(points) - 1) / (n - 1)
    return [[round(points[round(i * step)][0], 3), round(points[round(i * step)][1])] for i in range(n)]


def virtual_sleep(model: Any, watch: ClusterWatch, resolution: float) -> Callable[[float], None]:
    """A ``sleep`` that moves the simulated clock instead of waiting, observing every ``resolution``."""

    def sleep(seconds: float) -> None:
        watch.observe()  # what the caller changed before sleeping (moves submitted) starts now
        # The clock always moves, and reaches the target exactly or past it: a caller sleeping until
        # a moment (wake - now) would otherwise spin on a rounding remainder, the clock standing still.
        target = model.now() + max(float(seconds), MIN_SLEEP)
        while (left := target - model.now()) > 0:
            model.advance_by(max(min(resolution, left), MIN_SLEEP))
            watch.observe()
    return sleep
