"""The replication-factor goal: add or drop replicas of the chosen topics."""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from kafka_reassign.planning.spark.cluster import Cluster, Partition
from kafka_reassign.errors import GoalError, Problem
from kafka_reassign.planning.spark.goals.base import BuiltinGoal


class ReplicationFactor(BuiltinGoal):
    """Raise or lower the replication factor of the given topics."""

    name = "replication-factor"
    changes_replication_factor = True

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a, rf = self.a, self.opt.replication_factor
        assert rf is not None  # validated by the planner
        topics = set(self.opt.topics) if self.opt.topics else None
        scope = [pi for pi in sorted(self.movable)
                 if topics is None or self.cl.partitions[pi].topic in topics]
        ceiling = {b: self.hard_ceiling(b) for b in self.placeable}
        self._lb = sum(a.sizes[pi] * max(0, rf - len(a.replicas[pi])) for pi in scope)
        problems: list[Problem] = []
        rack_of = self.cl.rack_of
        for pi in sorted(scope, key=lambda i: -a.sizes[i]):
            while len(a.replicas[pi]) < rf:
                dest = self.pick_dest(pi, None, self.placeable, ceiling)
                if dest is None:
                    problems.append(Problem(self.cl.partitions[pi].name,
                                            f"no broker can take replica {len(a.replicas[pi]) + 1} "
                                            "without breaking the rack or capacity rules",
                                            "no_destination"))
                    break
                a.add(pi, dest[0], dest[1])
            while len(a.replicas[pi]) > rf:
                reps = a.replicas[pi]
                # drop a follower, preferring a duplicated rack, then the fullest broker
                counts: dict[str, int] = defaultdict(int)
                for r in reps:
                    counts[rack_of(r)] += 1
                cands = [r for r in reps[1:] if r not in self.excluded_brokers]
                if not cands:
                    problems.append(Problem(self.cl.partitions[pi].name,
                                            "every follower is on an excluded broker", "excluded"))
                    break
                drop = max(cands, key=lambda r: (counts[rack_of(r)], a.util(r)))
                a.remove(pi, drop)
        if problems:
            raise GoalError(problems[:20])
        return self.proposals()
