"""The disks goal: balance log dirs inside each broker (KIP-113 moves, no network copy)."""
from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import Sequence

from kafka_reassign.planning.spark.cluster import Cluster, Partition
from kafka_reassign.errors import GoalError, Problem
from kafka_reassign.planning.spark.goals.base import EPS, BuiltinGoal


class Disks(BuiltinGoal):
    """KIP-113: balance log dirs inside each broker; replicas stay on their brokers."""

    name = "disks"

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a, opt = self.a, self.opt
        self._lb = 0.0
        jbod = [b for b in self.placeable if len(self.cl.brokers[b].log_dirs) > 1]
        unknown = [p.name for p in self.cl.partitions
                   if not p.dirs_known and any(r in set(jbod) for r in p.replicas)]
        if unknown:
            raise GoalError(Problem("snapshot", f"{len(unknown)} partitions on brokers with several "
                                                f"log dirs have no log_dirs (e.g. {unknown[:3]}): "
                                                "take the snapshot with DescribeLogDirs",
                                    "unknown_log_dirs"))
        for b in jbod:
            dirs = self.cl.brokers[b].log_dirs
            util = a.broker_bytes[b] / self.cl.brokers[b].capacity_bytes
            # a dir may end at most `tolerance` above its broker's utilisation (the target every
            # plan must reach: the lower bound); a receiving dir also stays under the ceiling
            ceil = {d.path: d.capacity_bytes * util * (1 + opt.balance_tolerance) for d in dirs}
            room = {d.path: min(ceil[d.path], d.capacity_bytes * opt.capacity_ceiling) for d in dirs}
            self._lb += sum(max(0.0, a.dir_bytes[(b, d.path)] - ceil[d.path]) for d in dirs)
            items: dict[str, list[tuple[float, int]]] = defaultdict(list)
            for pi in self.movable:
                reps = a.replicas[pi]
                if b in reps:
                    items[a.dirs[pi][reps.index(b)]].append((a.sizes[pi], pi))
            for d in sorted(dirs, key=lambda d: ceil[d.path] - a.dir_bytes[(b, d.path)]):
                lst = sorted(items[d.path])
                sizes = [s for s, _ in lst]
                used: set[int] = set()
                while a.dir_bytes[(b, d.path)] - ceil[d.path] > EPS:
                    excess = a.dir_bytes[(b, d.path)] - ceil[d.path]
                    k = bisect_right(sizes, excess)
                    order = list(range(k - 1, -1, -1)) + list(range(k, len(lst)))
                    moved = False
                    for j in order:
                        if j in used or lst[j][0] <= 0:
                            continue
                        size, pi = lst[j]
                        dest = max((o for o in dirs if o.path != d.path and not o.cordoned
                                    and a.dir_bytes[(b, o.path)] + size <= room[o.path] + EPS),
                                   key=lambda o: room[o.path] - a.dir_bytes[(b, o.path)], default=None)
                        if dest is None:
                            continue
                        a.set_dir(pi, b, dest.path)
                        used.add(j)
                        moved = True
                        break
                    if not moved:
                        self.context.warnings.append(  # type: ignore[union-attr]
                            f"broker {b} log dir {d.path} stays above its target")
                        break
        return self.proposals()
