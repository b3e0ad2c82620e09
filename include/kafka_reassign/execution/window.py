"""The executor's window: which eligible steps fit the caps now, and submitting them.

:meth:`AdmissionWindow.refill` picks steps in strategy order within ``max_partition_movements``,
``max_movements_per_broker`` and ``max_leader_movements``, checks them against the cluster
(:func:`~kafka_reassign.execution.cluster_io.classify`: done already, ours in flight, or to
submit), records them as submitted, widens the throttled-replica lists and submits them in one
AlterPartitionReassignments.
"""
from __future__ import annotations

import time

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.execution.cluster_io import classify, elect_leaders, submit
from kafka_reassign.execution.outcome import Outcome, StepWatch
from kafka_reassign.execution.step_state import IN_FLIGHT, StepStates, log
from kafka_reassign.execution.wake import lane_broker, lane_left, lane_sending
from kafka_reassign.throttle.record import note_submitted

#: a lane moving this share of its rate is full: rounding must not read a full lane as short
SATURATED = 0.999


class AdmissionWindow(StepStates):
    """The refill half of :class:`~kafka_reassign.execution.executor.MoveExecutor`."""

    def pick(self, now: float | None = None) -> list[int]:
        """The eligible steps that fit the caps now, in strategy order (slots are taken).

        Besides the counts, every throttle its bytes pass (the sender's outbound one and each
        receiver's inbound one: separate quotas in Kafka) must have less than ``budget_seconds``
        of its rate in flight: small steps fill a broker's throttle until the next wake, and a
        broker with enough work takes none that would split it thinner. (Admitting a step when
        one side was short let an idle sender crowd a busy receiver: new brokers took 1.37x the
        fixed-leader bound in rehearsal, 500 moves on 60 brokers, against 1.21x.)
        """
        self._held_back, self._blocked = set(), None  # (None: any finish makes room)
        if self.admission_closed(time.time() if now is None else now):  # paused or outside the windows
            return []
        room = self.partition_cap - self.counts[IN_FLIGHT]
        if room > 0 and not self.dead:
            self.fill_frontier()
        if room <= 0 or not len(self.ready) or self.dead:
            return []
        blocked = self._blocked = set()  # what held steps back, for urgent_steps (None: any end counts)
        cap_b, cap_l = self.broker_cap, self.limits.max_leader_movements
        reduced = self.reduced_broker_caps  # brokers adaptive concurrency holds below cap_b
        rate, per_broker = self.move_rate, self.broker_rates
        items = self.flight_items()
        left = lane_left(items, rate, time.time() if now is None else now, per_broker)
        sending = lane_sending(items, rate, per_broker)
        fresh: set[int] = set()  # lanes given a step by this pick: its rate there is not known yet
        # Candidates are mostly turned down on the same few brokers and lanes, whose answer only a
        # step chosen on them changes: full brokers and lane verdicts are kept until then.
        full = {b for b, n in self.broker_load.items() if n >= reduced.get(b, cap_b)}  # caps are at least 1
        busy_of: dict[int, bool] = {}  # lane -> busy (_lane_busy), dropped when a step is chosen on it
        by_brokers, touched, data, lane_of = self.ready.by_brokers, self.touched, self.data, self.lane_of
        chosen: list[int] = []
        for bucket in self.ready.walk():
            for _, i in bucket:
                if full and not full.isdisjoint(touched[i]):
                    blocked.update(full.intersection(touched[i]))
                    if by_brokers and not full.isdisjoint(data[i]):  # (its data brokers are touched ones)
                        break  # a receiving broker of the whole bucket is full
                    continue
                if self.steps[i].moves_leader and self.leader_load >= cap_l:
                    self._blocked = None
                    continue
                lanes = lane_of[i]
                busy = self._busy_lanes(lanes, busy_of, left, sending, fresh)
                if busy:
                    self._held_back.update(busy)
                    continue
                if len(chosen) >= room:  # it would start but for the cluster cap: any finish makes room
                    self._blocked = None
                    return chosen
                self._hold(i, +1)
                full.update(b for b in touched[i] if self.broker_load[b] >= reduced.get(b, cap_b))
                fresh.update(lanes)
                for k in lanes:
                    left[k] = left.get(k, 0.0) + self.step_bytes[i]
                    busy_of.pop(k, None)
                chosen.append(i)
        if len(chosen) == len(self.ready):  # nothing left waiting (a run's tail): every end counts
            self._blocked = None
        return chosen

    def _busy_lanes(self, lanes: tuple[int, ...], busy_of: dict[int, bool], left: dict[int, float],
                    sending: dict[int, float], fresh: set[int]) -> list[int]:
        """The busy ones of a step's lanes (:meth:`_lane_busy`), each verdict kept in ``busy_of``."""
        out = []
        for k in lanes:
            verdict = busy_of.get(k)
            if verdict is None:
                rate = self.broker_rates.get(lane_broker(k), self.move_rate) if self.rate_control else self.move_rate
                verdict = busy_of[k] = self._lane_busy(rate, k, left, sending, fresh)
            if verdict:
                out.append(k)
        return out

    def _lane_busy(self, lane_rate: float, k: int, left: dict[int, float], sending: dict[int, float],
                   fresh: set[int]) -> bool:
        """Whether lane ``k`` has its budget in flight and moves at its full rate: a lane whose
        steps are slowed at their other end (a receiver shared with many copies) has room left
        for a copy to an idle receiver, however many bytes it has in flight. (Decommission of a
        rack, 6,000 moves on 60 brokers, in rehearsal: the busiest sender's lane sat under its
        rate behind its budget and finished at 1.19x its own work, after every other lane.)"""
        if left.get(k, 0.0) < lane_rate * self.limits.budget_seconds:
            return False
        return k in fresh or sending.get(k, 0.0) >= lane_rate * SATURATED

    def refill(self, admin: KafkaAdminPort, now: float) -> list[int]:
        """Submit the next eligible steps that fit; returns the indices now in flight because of it."""
        # Elections first: a lead step's source must lead before the copy that follows it starts.
        self.leader_changes += elect_leaders(admin, self._finished_leaders)
        self._finished_leaders = []
        started: list[int] = []
        for _ in range(8):  # steps found already done free their slot and their successor: look again
            chosen = self.pick(now)
            if not chosen:
                break
            admitted, skipped = self._admit(admin, chosen, now)
            started += admitted
            if not skipped:
                break
        to_send = {i: self.steps[i] for i in started if i not in self._adopted}
        # Adopted moves are noted too: this run's record is what makes them ours from now on
        # (kafka_reassign.execution.ownership), for its cancel and its restore.
        targets = {self.steps[i].key: self.steps[i].target for i in started if not self.steps[i].is_log_dir_only}
        # Recorded as submitted (with the replica lists, one record write) before submitting.
        self._sync_throttle(admin, started, targets)
        if self.record_store is not None and self.replica_throttle is None and targets:
            note_submitted(self.record_store, self.run_id, self.cluster_id, targets,
                           {self.steps[i].key for i in (*self.watches, *self._dead_moving)})
        if to_send:
            refused = submit(admin, to_send, self._dir_moves)
            for i, err in refused.items():
                self._kill(i, Outcome.FAILED, err, moving=False)
                self._touched_topics.add(self.steps[i].topic)
            if refused:
                self._sync_throttle(admin, [])
            self.submissions += 1
        if started:
            self.first_submit_at = self.first_submit_at if self.first_submit_at is not None else now
        self._adopted.clear()
        self._dir_moves = {}
        return started

    def top_up(self, admin: KafkaAdminPort, now: float) -> list[int]:
        """Refill between polls, when a broker the window held steps back from runs low.

        The listing is read again first: someone may have started moving a queued partition.
        """
        self._listing = None
        return self.refill(admin, now)

    def _admit(self, admin: KafkaAdminPort, chosen: list[int], now: float) -> tuple[list[int], bool]:
        """Classify the chosen steps against the cluster; (indices now in flight, any found done)."""
        if self._listing is None:
            self._listing = admin.list_partition_reassignments(None)
        adm = classify({i: self.steps[i] for i in chosen}, self._listing, admin, verify=self._verify)
        self._verify = False
        for i in adm.skipped:
            self._hold(i, -1)
            self.ready.discard(i)
            self._finish(i)
        for i, msg in adm.refused.items():
            self._hold(i, -1)
            self._kill(i, Outcome.FAILED, msg, moving=False)
        admitted = adm.submit + adm.adopted
        self._adopted.update(adm.adopted)
        self._dir_moves.update(adm.dir_moves)
        for i in admitted:
            self.ready.discard(i)
            self._set(i, IN_FLIGHT)
            self.watches[i] = StepWatch.start(now)
        if adm.adopted:
            log.info("run %s: adopted %d step(s) already in flight to their target", self.run_id, len(adm.adopted))
        return admitted, bool(adm.skipped)

    def _sync_throttle(self, admin: KafkaAdminPort, started: list[int], submitting: dict | None = None) -> None:
        """One update of the throttled-replica lists: entries of what is in flight, nothing else."""
        topics = self._touched_topics | {self.steps[i].topic for i in started}
        self._touched_topics = set()
        if self.replica_throttle is None or not (topics or submitting):
            return
        moving = [self.steps[i] for i in (*self.watches, *self._dead_moving)]
        self.replica_throttle.update(admin, moving, topics, submitting)
