"""The rack-repair goal: move replicas so each partition spans as many racks as it can."""
from __future__ import annotations

from typing import Sequence

from kafka_reassign.planning.spark.cluster import Cluster, Partition
from kafka_reassign.planning.spark.goals.base import BuiltinGoal


class RackRepair(BuiltinGoal):
    """Move replicas that share a rack with another replica of their partition to unused racks."""

    name = "rack-repair"

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a = self.a
        rack_of = self.cl.rack_of
        ceiling = {b: self.hard_ceiling(b) for b in self.placeable}
        self._lb = 0.0
        unfixable = 0
        for pi in sorted(self.movable, key=lambda i: -a.sizes[i]):
            reps = a.replicas[pi]
            want = min(self.n_racks, len(reps))
            have = len({rack_of(r) for r in reps})
            if have >= want:
                continue
            self._lb += a.sizes[pi] * (want - have)
            # keep the leader and the first replica seen in each rack; move the others
            seen: set[str] = set()
            dupes: list[int] = []
            for r in reps:
                if rack_of(r) in seen:
                    dupes.append(r)
                else:
                    seen.add(rack_of(r))
            for r in sorted(dupes, key=lambda x: -a.util(x)):
                if len({rack_of(x) for x in a.replicas[pi]}) >= want:
                    break
                if r in self.excluded_brokers:
                    continue
                free = [b for b in self.placeable if rack_of(b) not in {rack_of(x) for x in a.replicas[pi]}]
                dest = self.pick_dest(pi, r, free, ceiling)
                if dest is None:
                    unfixable += 1
                    continue
                a.move(pi, r, dest[0], dest[1])
        if unfixable and self.context is not None:
            self.context.warnings.append(f"{unfixable} replicas still share a rack: no broker in a "
                                         "free rack had room under the capacity ceiling")
        return self.proposals()
