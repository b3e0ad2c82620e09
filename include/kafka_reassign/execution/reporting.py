"""The executor's progress view: counts, bytes moved and left, rate, ETA and the rows worth showing."""
from __future__ import annotations

import time

from kafka_reassign.execution.outcome import Outcome
from kafka_reassign.execution.progress import ProgressView, StepRow
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.execution.step_state import DEAD, DONE, IN_FLIGHT, QUEUED, StepStates

IN_FLIGHT_NAME = "in_flight"


class ProgressReporting(StepStates):
    """The progress half of :class:`~kafka_reassign.execution.executor.MoveExecutor`."""

    def progress(self, now: float | None = None) -> ProgressView:
        """Counts, bytes moved and left, rate, ETA and the rows of the steps worth showing."""
        now = time.time() if now is None else now
        moving = sum(max(0, w.bytes_total - w.bytes_left) for w in self.watches.values())
        moved = int(self.done_bytes + moving)
        if not self._rate_samples or self._rate_samples[-1][0] < now:
            self._rate_samples.append((now, float(moved)))
        rate = None
        (t0, m0), (t1, m1) = self._rate_samples[0], self._rate_samples[-1]
        if t1 > t0:
            rate = max(0.0, (m1 - m0) / (t1 - t0))
        # Left: what each step in flight still lacks as last observed (a log written to meanwhile
        # grows it), plus the planned bytes of the steps not submitted yet.
        queued = self.bytes_total - self.done_bytes - sum(self.step_bytes[i] for i in self.watches)
        left = int(max(0.0, queued) + sum(self._watch_left(i) for i in self.watches))
        outcome = self.outcome()
        eta = 0.0 if outcome is Outcome.DONE else (left / rate if rate else None)
        return ProgressView(
            run_id=self.run_id, outcome=outcome.value, message=self.message, steps_total=self.steps_total,
            steps_done=self.counts[DONE], steps_in_flight=self.counts[IN_FLIGHT], steps_queued=self.counts[QUEUED],
            steps_dead=self.counts[DEAD], partitions_total=self.partitions_total,
            partitions_done=self.partitions_done, bytes_total=max(self.bytes_total, moved + left), bytes_moved=moved,
            bytes_left=left,
            rate_bytes_per_sec=rate, eta_seconds=eta, started_at=self.started_at,
            first_submit_at=self.first_submit_at, updated_at=now, polls=self.polls,
            checks=self.checks, leader_changes=self.leader_changes,
            throttle_bytes_per_sec=self.rules.throttle_rate, rows=self._rows(),
            partition_cap=self.partition_cap, broker_cap=self.broker_cap,
            reduced_broker_caps={str(b): c for b, c in self.reduced_broker_caps.items()},
            cap_change=self.governor.last_change.text if self.governor and self.governor.last_change else "",
            held=self.hold_reason, reopens_at=self.reopens_at(now),
            broker_throttles=self.rate_control.summary() if self.rate_control else {},
            throttle_change=self.rate_control.last_change() if self.rate_control else "")

    def rate_measured(self) -> bool:
        """Whether progress has two samples apart in time, so a rate and an ETA can be shown."""
        return len(self._rate_samples) >= 2 and self._rate_samples[-1][0] > self._rate_samples[0][0]

    def _watch_left(self, i: int) -> int:
        """Bytes step ``i`` still lacks: as last observed, or all of it before its first observation."""
        w = self.watches[i]
        return int(w.bytes_left if w.bytes_total else self.step_bytes[i])

    def _rows(self) -> list[StepRow]:
        out = []
        for i in [*sorted(self.dead), *self.in_flight]:
            w = self.watches.get(i)
            status, msg = (self.dead[i][0].value, self.dead[i][1]) if i in self.dead else (IN_FLIGHT_NAME, "")
            out.append(_row(self.steps[i], status, w.bytes_total if w and w.bytes_total else int(self.step_bytes[i]),
                            self._watch_left(i) if w else 0, w.submitted_at if w else None, msg))
        out.extend(_row(s, "done", int(size), 0, None, "") for s, size in reversed(self._recent_done))
        return out


def _row(s: StepMove, status: str, total: int, left: int, submitted_at: float | None, msg: str) -> StepRow:
    return StepRow(name=s.name, step=f"{s.step_index + 1}/{s.step_count}", status=status, current=list(s.current),
                   target=list(s.target), bytes_total=total, bytes_left=left, submitted_at=submitted_at, message=msg)
