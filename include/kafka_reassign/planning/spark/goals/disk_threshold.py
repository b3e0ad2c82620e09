"""The disk-threshold goal: bring every log dir to at most X% of its capacity, moving the least data.

Only replicas on log dirs above the threshold move; a dir already under it is touched only as a
destination, and ends under it too. A replica leaves for another log dir of its own broker
(KIP-113, no network copy) when one has room, else for another broker chosen by the shared
placement rules (:class:`~kafka_reassign.planning.spark.goals.base.BuiltinGoal`: rack diversity,
cordons, excluded brokers, the capacity ceiling).
"""
from __future__ import annotations

from typing import Sequence

from kafka_reassign.errors import GoalError, Problem
from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.planning.spark.cluster import Cluster, Partition
from kafka_reassign.planning.spark.goals.base import EPS, BuiltinGoal

Dir = tuple[int, str]
#: grid steps below the need whose subsets are checked for a real cover (sizes were rounded down)
ROUNDING_WINDOW = 32


def percent_problem(pct: object) -> Problem | None:
    """What is wrong with a threshold percentage (None: a number in (0, 100])."""
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 < pct <= 100:
        return Problem("disk_threshold_percent", "the disk-threshold goal needs a percentage of a log "
                                                 f"dir's capacity in (0, 100], e.g. 80; got {pct!r}", "bad_option")
    return None


def threshold_fraction(opts: PlanOptions) -> float:
    """The goal's threshold as a fraction of a dir's capacity.

    :raises GoalError: the percentage is missing or outside (0, 100]
    """
    problem = percent_problem(opts.disk_threshold_percent)
    if problem is not None:
        raise GoalError(problem)
    return float(opts.disk_threshold_percent) / 100.0  # type: ignore[arg-type]


def dir_loads(cluster: Cluster) -> dict[Dir, float]:
    """Bytes on every (broker, log dir) of the snapshot."""
    loads: dict[Dir, float] = {(b.id, d.path): 0.0 for b in cluster.brokers.values() for d in b.log_dirs}
    for p in cluster.partitions:
        for r, d in zip(p.replicas, p.log_dirs):
            loads[(r, d)] += p.size_bytes
    return loads


def excess_bytes(cluster: Cluster, loads: dict[Dir, float], fraction: float) -> dict[Dir, float]:
    """Bytes above ``fraction`` x capacity on every log dir over it."""
    out: dict[Dir, float] = {}
    for b in cluster.brokers.values():
        for d in b.log_dirs:
            over = loads[(b.id, d.path)] - fraction * d.capacity_bytes
            if over > EPS:
                out[(b.id, d.path)] = over
    return out


def disk_threshold_lower_bound(cluster: Cluster, fraction: float, frozen: frozenset[int] = frozenset()) -> float:
    """Sum over the dirs above the threshold (on brokers not ``frozen``) of their bytes above it.

    Valid: a plan reaching the goal takes at least that excess off each such dir, and every byte
    leaving a dir is a replica copied once (a KIP-113 move, or a new replica paired with it).

    :param frozen: brokers whose replicas may not move (excluded, dead): out of the goal's reach
    """
    excess = excess_bytes(cluster, dir_loads(cluster), fraction)
    return sum(v for (b, _), v in excess.items() if b not in frozen)


def scope_problems(cluster: Cluster, final: Sequence[tuple[Sequence[int], Sequence[str]]],
                   opts: PlanOptions) -> list[Problem]:
    """Replicas the goal took off a log dir that was not above the threshold (out of scope)."""
    over = set(excess_bytes(cluster, dir_loads(cluster), threshold_fraction(opts)))
    problems: list[Problem] = []
    for p, (reps, dirs) in zip(cluster.partitions, final):
        kept = set(zip(reps, dirs))
        left = [rd for rd in zip(p.replicas, p.log_dirs) if rd not in kept and rd not in over]
        if left:
            problems.append(Problem(p.name, f"disk-threshold moved replicas off {left}, which were "
                                            "not above the threshold", "out_of_scope"))
    return problems


def min_cover(sizes: Sequence[float], need: float, steps: int = 10_000) -> list[int]:
    """Indices of replicas whose sizes add up to at least ``need`` with the least total ([] when
    all of them together fall short).

    The best is one replica at least ``need``, or several smaller ones adding up to less than
    2 x need (dropping the last one of a minimal cover leaves less than need). Those sums are
    found by a subset-sum over a bitset on a grid of need / ``steps``, sizes rounded down: a
    set reaching ``steps`` grid steps covers, so the cover is at most one grid step per replica
    above the best. A set up to :data:`ROUNDING_WINDOW` steps short may cover too (exact ties):
    the lightest reachable sums from there up are tried first.
    """
    if need <= 0 or sum(sizes) < need:
        return []
    single = min((i for i, s in enumerate(sizes) if s >= need), key=lambda i: sizes[i], default=None)
    small = [i for i, s in enumerate(sizes) if s < need]
    unit = need / steps
    weights = [int(sizes[i] // unit) for i in small]
    mask = (1 << (2 * steps + 1)) - 1
    reach = [1]  # reach[k]: bit t set = a subset of the first k small replicas weighs t grid steps
    for w in weights:
        reach.append((reach[-1] | (reach[-1] << w)) & mask)
    several: list[int] = []
    lo = max(0, steps - min(len(small), ROUNDING_WINDOW))
    sums = reach[-1] >> lo
    while sums:  # reachable sums, lightest first, until one covers
        low = sums & -sums
        candidate = _subset(reach, weights, small, lo + low.bit_length() - 1)
        if sum(sizes[i] for i in candidate) >= need:
            several = candidate
            break
        sums ^= low
    if not several and single is None:  # only replicas under one grid step: largest first
        for i in sorted(small, key=lambda i: -sizes[i]):
            several.append(i)
            if sum(sizes[j] for j in several) >= need:
                break
    if single is not None and (not several or sizes[single] <= sum(sizes[i] for i in several)):
        return [single]
    return several


def _subset(reach: list[int], weights: list[int], items: list[int], t: int) -> list[int]:
    """The items of one subset weighing ``t`` (bit ``t`` of ``reach[-1]`` is set)."""
    out = []
    for k in range(len(weights), 0, -1):
        if not (reach[k - 1] >> t) & 1:
            out.append(items[k - 1])
            t -= weights[k - 1]
    return out


class DiskThreshold(BuiltinGoal):
    """Offload every log dir above ``disk_threshold_percent`` of its capacity, least bytes first."""

    name = "disk-threshold"

    def dest_dir(self, broker: int, size: float) -> str | None:
        # a receiving dir ends under the threshold (and the ceiling), not only under the ceiling
        return self.a.best_dir(broker, size, self._limit)

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self.fraction = threshold_fraction(self.opt)
        self._limit = min(self.fraction, self.opt.capacity_ceiling)
        self._scope(partitions)
        self.ceiling = {b: self.hard_ceiling(b) for b in self.placeable}  # dirs: dest_dir
        frozen = frozenset(b for b, x in self.cl.brokers.items() if b in self.excluded_brokers or not x.alive)
        self._lb = disk_threshold_lower_bound(self.cl, self.fraction, frozen)
        excess = excess_bytes(self.cl, dict(self.a.dir_bytes), self.fraction)
        left = [f"broker {b} {path}" for b, path in sorted(excess) if b in frozen]
        # the movable replicas of each full dir, found in one pass (only they may move)
        self.on_dir: dict[Dir, list[int]] = {k: [] for k in excess}
        for pi in sorted(self.movable):
            for r, d in zip(self.a.replicas[pi], self.a.dirs[pi]):
                if (r, d) in self.on_dir and self.a.sizes[pi] > 0:
                    self.on_dir[(r, d)].append(pi)
        stuck: list[str] = []
        for b, path in sorted(excess, key=lambda k: -excess[k]):  # the fullest dirs get the room first
            if b not in frozen and not self._offload(b, path):
                stuck.append(f"broker {b} {path}")
        # the bound is for every reachable dir under the threshold: a plan stopping short has no ratio
        self.bound_reached = not stuck
        warnings = self.context.warnings if self.context is not None else []
        if left:
            warnings.append(f"{len(left)} log dirs above {self.fraction:.0%} are on excluded or dead brokers "
                            f"and stay as they are (e.g. {', '.join(left[:3])})")
        if stuck:
            warnings.append(f"{len(stuck)} log dirs stay above {self.fraction:.0%} (e.g. {', '.join(stuck[:3])}): "
                            "no replica on them could go to a dir or broker with room under the threshold")
        return self.proposals()

    def _offload(self, b: int, path: str) -> bool:
        """Move replicas off ``(b, path)`` until it is under the threshold; False if it stays over.

        Moves the set of replicas whose sizes cover what is over with the least bytes
        (:func:`min_cover`); a replica that finds no destination leaves the pool and the cover
        is chosen again for what is still over.
        """
        a = self.a
        cap = next(d.capacity_bytes for d in self.cl.brokers[b].log_dirs if d.path == path)
        pool = self.on_dir[(b, path)]
        while a.dir_bytes[(b, path)] - self.fraction * cap > EPS:
            pick = min_cover([a.sizes[pi] for pi in pool], a.dir_bytes[(b, path)] - self.fraction * cap)
            if not pick:
                return False
            for j in sorted(pick, key=lambda j: -a.sizes[pool[j]]):
                if a.dir_bytes[(b, path)] - self.fraction * cap <= EPS:
                    break
                self._relocate(pool[j], b, path)
            # moved replicas and those without a destination both leave the pool
            taken = set(pick)
            pool = [pi for j, pi in enumerate(pool) if j not in taken]
        return True

    def _relocate(self, pi: int, b: int, path: str) -> bool:
        """Move the replica of ``pi`` on ``(b, path)``: to a sibling dir, else to another broker."""
        a, size = self.a, self.a.sizes[pi]
        sibling = next((d.path for d in sorted(self.cl.brokers[b].log_dirs,
                                               key=lambda d: a.dir_bytes[(b, d.path)] / d.capacity_bytes)
                        if d.path != path and not d.cordoned
                        and a.dir_bytes[(b, d.path)] + size <= d.capacity_bytes * self._limit + EPS), None)
        if sibling is not None:
            a.set_dir(pi, b, sibling)
            return True
        dest = self.pick_dest(pi, b, self.placeable, self.ceiling)
        if dest is None:
            return False
        a.move(pi, b, dest[0], dest[1])
        return True
