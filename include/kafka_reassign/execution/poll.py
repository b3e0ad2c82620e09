"""The executor's poll: read the steps in flight and judge each (done, in progress, dead).

:meth:`StepPoller.poll` is the executor's; :func:`watch_poll` is the same reading and judging
for a deferrable trigger, which holds only the steps in flight (:meth:`StepStates.watch_spec`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.cluster.state import TopicPartition
from kafka_reassign.execution.cluster_io import ClusterView, left_listing, observe, read_cluster
from kafka_reassign.execution.outcome import Outcome, OutcomeRules, StepObservation, StepWatch, step_outcome
from kafka_reassign.execution.step_state import StepStates
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.execution.wake import WakeRule


class StepPoller(StepStates):
    """The poll half of :class:`~kafka_reassign.execution.executor.MoveExecutor`."""

    def poll(self, admin: KafkaAdminPort, now: float) -> list[TopicPartition]:
        """Read the steps in flight and judge each; returns partitions whose last step finished."""
        self.started_at = self.started_at if self.started_at is not None else now
        self.polls += 1
        flying = self.in_flight
        self._finished_leaders = []
        if not flying:
            self._listing = None
            return []
        view = read_cluster(admin, [self.steps[i] for i in flying], whole_brokers=self.rate_control is not None)
        self._listing = view.in_flight
        for i in flying:
            self._judge(i, observe(self.steps[i], view), now)
        self._adapt_throttle(admin, view, flying, now)
        return list(self._finished_leaders)

    def _adapt_throttle(self, admin: KafkaAdminPort, view: ClusterView, flying: list[int], now: float) -> None:
        """Give the brokers in flight the rates their client traffic leaves room for (adaptive throttle)."""
        if self.rate_control is None:
            return
        moving = [self.steps[i] for i in flying]
        copying = {(s.topic, s.partition, b) for s in moving for b in s.adding} | view.futures
        brokers = {b for s in moving for b in (*s.current, *s.target)} & view.alive
        self.rate_control.observe(admin, view.sizes, copying, brokers, now)

    def _judge(self, i: int, obs: StepObservation, now: float) -> None:
        """Fold one observation of step ``i`` in and act on its outcome (done, dead, going on)."""
        s, w = self.steps[i], self.watches[i]
        w.observe(obs, now)
        outcome, msg = step_outcome(s.name, s.target, obs, w, self.rules_for(i), now,
                                    log_dir_only=s.is_log_dir_only, produce_rate=self.produce_rates.get(s.key, 0.0))
        if outcome is Outcome.DONE:
            self._finish(i)
            # Leadership moves by itself when the old leader leaves; otherwise elect the new
            # preferred leader once the partition's last step is done (not mid-chain, where
            # it would make one new broker the source of every later copy), or at once after
            # a lead step (leader-aware sourcing: the source must lead before its copy).
            lead = self.sender[i]
            if s.target and lead != s.target[0] and lead in s.target and (self.next_of[i] < 0 or s.is_leader_only):
                self._finished_leaders.append(s.key)
        elif outcome.final:
            self._kill(i, outcome, msg)

    def quick_check(self, admin: KafkaAdminPort, now: float) -> tuple[int, bool]:
        """One ListPartitionReassignments: (steps found finished, whether a full poll is due).

        A step whose partition left the listing finished (KIP-435 drops it once the new replicas
        are in sync; a full poll would judge it the same way): it is judged done here, with no
        other request. One listed with another target was changed by someone: a full poll judges it.
        """
        self._last_check = now
        self.checks += 1
        self._listing = listing = admin.list_partition_reassignments(None)
        left = left_listing({i: self.steps[i] for i in self.watches}, listing)
        gone = [i for i in left if self.steps[i].key not in listing]
        view = ClusterView(in_flight=listing, alive={b for i in gone for b in (*self.steps[i].current,
                                                                             *self.steps[i].target)})
        for i in gone:
            self._judge(i, observe(self.steps[i], view), now)
        return len(gone), len(gone) < len(left)


def watch_poll(admin: KafkaAdminPort, spec: dict[str, Any], now: float, seen_offline: set[int] | None = None
               ) -> tuple[dict[str, Any], list[str]]:
    """One poll of a trigger's steps (see :meth:`MoveExecutor.watch_spec`), judged like the executor's.

    :param seen_offline: step indices already reported waiting on an offline broker
    :returns: (the spec with updated watches, reasons to hand back to the executor: a step
        finished or died, or a broker it needs just went offline; empty = keep waiting)
    """
    steps = {int(i): StepMove.from_json(d) for i, d in spec["steps"].items()}
    watches = {int(i): StepWatch.from_json(w) for i, w in spec["watch"].items()}
    rules = OutcomeRules.from_json(spec["rules"])
    # Each step's throttle as the executor last set it (adaptive throttle), for stall messages.
    rates = spec.get("throttle_rates") or {}
    reasons: list[str] = []
    if steps:
        view = read_cluster(admin, list(steps.values()))
        for i, s in steps.items():
            obs = observe(s, view)
            was_offline = watches[i].offline_since is not None
            watches[i].observe(obs, now)
            step_rules = replace(rules, throttle_rate=rates[str(i)]) if rates.get(str(i)) else rules
            outcome, msg = step_outcome(s.name, s.target, obs, watches[i], step_rules, now,
                                        log_dir_only=s.is_log_dir_only)
            if outcome is not Outcome.IN_PROGRESS:
                reasons.append(msg)
            elif obs.offline and not was_offline and (seen_offline is None or i not in seen_offline):
                reasons.append(msg)
                if seen_offline is not None:
                    seen_offline.add(i)
    spec = {**spec, "watch": {str(i): w.to_json() for i, w in watches.items()}}
    return spec, reasons


def watch_check(admin: KafkaAdminPort, spec: dict[str, Any]) -> bool:
    """A trigger's cheap check (one ListPartitionReassignments): has a step left the listing?"""
    steps = {int(i): StepMove.from_json(d) for i, d in spec["steps"].items()}
    return bool(left_listing(steps, admin.list_partition_reassignments(None)))


def next_watch_wake(spec: dict[str, Any], last_check: float, now: float, next_poll: float) -> tuple[float, str]:
    """(when, what) a trigger does next: ``poll`` (full), ``check`` (cheap), ``refill`` (wake the task)
    or ``opens`` (a maintenance window opens: wake the task to start new steps).

    A spec from a trigger deferred before wakes were scheduled has no ``wake``: it only polls.
    """
    opens = spec.get("reopens_at")
    if opens is not None and opens < next_poll:
        next_poll, first = float(opens), "opens"
    else:
        first = "poll"
    if not spec.get("wake") or not spec.get("watch"):
        return next_poll, first
    watches = {int(i): StepWatch.from_json(w) for i, w in spec["watch"].items()}
    check, refill = WakeRule.from_json(spec["wake"]).times(watches, last_check, now)
    options = [(next_poll, first)]
    if check is not None:
        options.append((check, "check"))
    if refill is not None:
        options.append((refill, "refill"))
    return min(options)
