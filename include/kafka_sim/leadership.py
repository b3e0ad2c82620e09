"""Leader elections: ElectLeaders (preferred, unclean).
"""
from __future__ import annotations

from kafka_sim import errors as E
from kafka_sim.state import _locked



class Leadership:
    """Mixin of ClusterModel: leader elections."""

    # ------------------------------------------------------------ elections
    @_locked
    def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, int, str | None]]:
        """ElectLeaders: 0 preferred, 1 unclean.

        :param election_type: 0 preferred, 1 unclean
        :param partitions: (topic, partition) list, None for every partition (then only
            partitions where an election happened or failed are reported)
        """
        self._run(self.now())
        report_all = partitions is not None
        if partitions is None:
            partitions = [(t.name, p.index) for t in self.topics.values() for p in t.partitions]
        out = []
        for topic, index in partitions:
            p = self._part(topic, index)
            if p is None:
                out.append((topic, index, E.UNKNOWN_TOPIC_OR_PARTITION,
                            "The partition does not exist."))
                continue
            if election_type == 0:
                preferred = p.replicas[0]
                if p.leader == preferred:
                    code, msg = E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
                elif preferred not in p.isr or not self.brokers[preferred].alive:
                    code, msg = E.PREFERRED_LEADER_NOT_AVAILABLE, (
                        f"Failed to elect leader for partition {topic}-{index} under strategy "
                        "PreferredReplicaPartitionLeaderElectionStrategy")
                else:
                    self._change_leader(p, preferred)
                    self.writes["ElectLeaders"] += 1
                    code, msg = E.NONE, None
            elif election_type == 1:
                if p.leader >= 0 and self.brokers[p.leader].alive:
                    code, msg = E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
                else:
                    live = [b for b in p.replicas if self.brokers[b].alive]
                    if not live:
                        code, msg = E.LEADER_NOT_AVAILABLE, (f"Failed to elect leader for partition {topic}-{index} "
                                                             "under strategy UncleanPartitionLeaderElectionStrategy")
                    else:
                        new = self._first_live_isr(p) if self._first_live_isr(p) >= 0 else live[0]
                        if new not in p.isr:
                            p.isr = [new]
                        self._change_leader(p, new)
                        self.writes["ElectLeaders"] += 1
                        code, msg = E.NONE, None
            else:
                code, msg = E.INVALID_REQUEST, f"Unknown election type {election_type}"
            if report_all or code != E.ELECTION_NOT_NEEDED:
                out.append((topic, index, code, msg))
        self._flush_dirty()
        return out

