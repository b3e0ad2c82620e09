"""Watching a simulated cluster while a rehearsal runs: what moves, is copied, stays in sync.

Everything is measured from the cluster's side (the simulator's own state, not the executor's
view). :func:`virtual_sleep` is the rehearsal's ``sleep``: it moves the simulated clock and
observes the cluster at every sub-step.
"""
from __future__ import annotations

from typing import Any, Callable

#: Points kept in the report's timeline.
TIMELINE_POINTS = 60
#: Plan partitions (not moving) whose ISR is checked per observation, in rotation.
ISR_SLICE = 2000
#: Shortest virtual sleep (simulated seconds).
MIN_SLEEP = 1e-6


class ClusterWatch:
    """Observes a simulated cluster between polls: what is moving, copied, in sync.

    :param model: the simulator's ClusterModel
    :param plan_keys: the plan's partitions (their ISR is watched)
    :param dir_keys: the plan's partitions with log dirs named (KIP-113 moves are watched too)
    """

    def __init__(self, model: Any, plan_keys: set[tuple[str, int]],
                 dir_keys: set[tuple[str, int]] | None = None) -> None:
        self.model = model
        self.plan_keys = plan_keys
        self.dir_keys = sorted(dir_keys or ())
        self.first_submit: float | None = None
        self.last_done: float | None = None
        self.moving_since: dict[tuple[str, int], float] = {}
        self.moving_total: dict[tuple[str, int], float] = {}
        # partition -> (broker, "broker" | "dir") -> bytes its new copy holds; and their sum
        self.copied: dict[tuple[str, int], dict[tuple[int, str], float]] = {}
        self.copied_total = 0.0
        self.timeline: list[list[float]] = []
        self.peak: dict[int, dict[str, int]] = {}
        self.urp_peak = 0
        self.risks: list[dict[str, Any]] = []
        self._risk_seen: set[tuple[str, int, str]] = set()
        self._isr0: dict[tuple[str, int], set[int]] = {}
        self._min_isr: dict[str, int] = {}
        self._prev_t: float | None = None
        self._order = sorted(plan_keys)
        self._cursor = 0
        with model.lock:
            for key in plan_keys:
                p = model.partition(*key)
                if p is not None:
                    self._isr0[key] = set(p.isr)

    def observe(self, scan: bool = False) -> None:
        """Record the cluster's state now (called at every sub-step of a virtual wait).

        :param scan: also check the ISR of a slice of the plan's partitions that are not moving
        """
        m = self.model
        with m.lock:
            now = m.sim_time()
            keys: set[tuple[str, int]] = set()
            self._reassignments(now, keys)
            if self.dir_keys:
                self._dir_moves(now, keys)
            # A move that disappeared finished since the previous look: count the middle.
            done_at = now if self._prev_t is None else (self._prev_t + now) / 2.0
            for key in [k for k in self.moving_since if k not in keys]:
                self.moving_total[key] = self.moving_total.get(key, 0.0) + done_at - self.moving_since.pop(key)
                self.last_done = done_at
                p = m.partition(*key)
                if p is not None:  # finished: its new copies hold the whole log
                    for sub in list(self.copied.get(key, ())):
                        self._copy(key, sub, float(p.log_bytes()))
            self._check_isr(now, keys, scan)
            if self.first_submit is not None:
                self.timeline.append([now - self.first_submit, self.copied_total])
            self._prev_t = now

    def _copy(self, key: tuple[str, int], sub: tuple[int, str], nbytes: float) -> None:
        subs = self.copied.setdefault(key, {})
        self.copied_total += nbytes - subs.get(sub, 0.0)
        subs[sub] = nbytes

    def _moving(self, key: tuple[str, int], now: float, keys: set[tuple[str, int]]) -> None:
        keys.add(key)
        if self.first_submit is None:
            self.first_submit = now
        self.moving_since.setdefault(key, now)

    def _reassignments(self, now: float, keys: set[tuple[str, int]]) -> None:
        """Inter-broker moves in flight: bytes copied, moves per broker in and out."""
        m = self.model
        inn: dict[int, int] = {}
        out: dict[int, int] = {}
        for topic, index, _replicas, adding, _removing in m.list_reassignments(None):
            p = m.partition(topic, index)
            if p is None:
                continue
            self._moving((topic, index), now, keys)
            for b in adding:
                r = p.replica(b)
                if r is not None:
                    self._copy((topic, index), (b, "broker"), float(r.exact_bytes()))
                inn[b] = inn.get(b, 0) + 1
            if adding and p.leader >= 0:
                out[p.leader] = out.get(p.leader, 0) + 1
        for side, counts in (("in", inn), ("out", out)):
            for b, n in counts.items():
                peak = self.peak.setdefault(b, {"in": 0, "out": 0})
                peak[side] = max(peak[side], n)

    def _dir_moves(self, now: float, keys: set[tuple[str, int]]) -> None:
        """KIP-113 moves between log dirs of the plan's partitions (future replicas)."""
        m = self.model
        for key in self.dir_keys:
            p = m.partition(*key)
            for b in (p.replicas if p is not None else ()):
                r = p.replica(b)
                if r is not None and r.future_log_dir is not None:
                    self._moving(key, now, keys)
                    self._copy(key, (b, "dir"), float(r.future_bytes))

    def _check_isr(self, now: float, moving: set[tuple[str, int]], scan: bool) -> None:
        """ISR of the moving partitions, and (``scan``) of a rotating slice of the plan's others."""
        m = self.model
        n = len(self._order) if scan else 0
        start = self._cursor
        self._cursor = (start + ISR_SLICE) % n if n else 0
        others = [self._order[(start + i) % n] for i in range(min(ISR_SLICE, n))]
        urp = 0
        for key in list(moving) + [k for k in others if k not in moving]:
            p = m.partition(*key)
            if p is None:
                continue
            isr = set(p.isr)
            if len(isr) < len(p.replicas):
                urp += 1
            lost = (self._isr0.get(key, set()) & set(p.replicas)) - isr - set(p.removing)
            if lost:
                self._risk(key, f"replica(s) {sorted(lost)} left the ISR", now)
            min_isr = self._min_isr.get(key[0])
            if min_isr is None:
                min_isr = self._min_isr[key[0]] = m.min_insync_replicas(key[0])
            if len(isr) < min_isr:
                self._risk(key, f"ISR {sorted(isr)} below min.insync.replicas={min_isr} (acks=all writes fail)", now)
            if key not in moving:
                self._isr0[key] = isr
        self.urp_peak = max(self.urp_peak, urp)

    def _risk(self, key: tuple[str, int], what: str, now: float) -> None:
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


def downsample_timeline(points: list[list[float]], n: int = TIMELINE_POINTS) -> list[list[float]]:
    """At most ``n`` evenly spaced [seconds, bytes] points of ``points`` (rounded), first and last kept."""
    if len(points) <= n:
        return [[round(t, 3), round(b)] for t, b in points]
    step = (len(points) - 1) / (n - 1)
    return [[round(points[round(i * step)][0], 3), round(points[round(i * step)][1])] for i in range(n)]


def virtual_sleep(model: Any, watch: ClusterWatch, resolution: float) -> Callable[[float], None]:
    """A ``sleep`` that moves the simulated clock instead of waiting, observing every ``resolution``."""
    scanned = [float("-inf")]

    def sleep(seconds: float) -> None:
        # The ISR scan of non-moving partitions at most once a resolution: the executor may wake
        # every second (the wake schedule), and a scan costs as much as thousands of in-flight checks.
        now = model.now()
        scan = now - scanned[0] >= resolution
        if scan:
            scanned[0] = now
        watch.observe(scan=scan)
        # The clock always moves, and reaches the target exactly or past it: a caller sleeping until
        # a moment (wake - now) would otherwise spin on a rounding remainder, the clock standing still.
        target = model.now() + max(float(seconds), MIN_SLEEP)
        while (left := target - model.now()) > 0:
            model.advance_by(max(min(resolution, left), MIN_SLEEP))
            watch.observe()
    return sleep
