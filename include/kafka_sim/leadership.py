"""Leader elections: ElectLeaders (preferred, unclean).
"""
from __future__ import annotations

import bisect
from typing import Iterable

from kafka_sim import errors as E
from kafka_sim.model_base import CATCH_UP_EPS, locked
from kafka_sim.state import Partition, Replica


#: ReplicationControlManager's maxElectionsPerImbalance: elections per balancing run.
MAX_ELECTIONS_PER_IMBALANCE = 1000


class Leadership:
    """Mixin of ClusterModel: leader changes and elections."""

    # ------------------------------------------------------------ auto preferred-leader election
    def _note_preferred_leader(self, p: Partition) -> None:
        """Track partitions not led by their first replica (ReplicationControlManager.imbalancedPartitions)."""
        if p.leader >= 0 and p.replicas and p.leader != p.replicas[0]:
            self._imbalanced.add(p)
            self._schedule_balance(self._t)
        else:
            self._imbalanced.discard(p)

    def _schedule_balance(self, now: float) -> None:
        """QuorumController.maybeScheduleNextBalancePartitionLeaders: one run per check interval."""
        if self._balance_at is not None or not self._imbalanced:
            return
        if self.configs.value(None, "auto.leader.rebalance.enable") != "true":
            return
        interval = self.configs.long_value(None, "leader.imbalance.check.interval.seconds")
        self._balance_at = now + max(1, interval)

    def _balance_leaders(self) -> None:
        """maybeBalancePartitionLeaders: a PREFERRED election for each imbalanced partition.

        The first replica becomes leader if it is alive and in the ISR; otherwise the
        partition keeps its leader and is tried again at the next run.
        """
        self._balance_at = None
        elections = 0
        for p in list(self._imbalanced):
            if elections >= MAX_ELECTIONS_PER_IMBALANCE:
                break
            topic = self.topics.get(p.topic)
            if topic is None or p.index >= len(topic.partitions) or topic.partitions[p.index] is not p:
                self._imbalanced.discard(p)
                continue
            preferred = p.replicas[0]
            if preferred in p.isr and self.brokers[preferred].alive and p.leader != preferred:
                self._change_leader(p, preferred)
                elections += 1
        self._flush_dirty()
        if elections >= MAX_ELECTIONS_PER_IMBALANCE:
            self._balance_at = self._t + 0.01  # more to do: rescheduled almost at once
        else:
            self._schedule_balance(self._t)

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
            self._usage_changed(p)
            if p._rec_pos:
                cut = bisect.bisect_right(p._rec_pos, nbytes + CATCH_UP_EPS)
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
            self._usage_changed(p)
            r.caught_up_at = self._t

    # ------------------------------------------------------------ elections
    @locked
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

