"""What a rehearsal predicts for a real run (:class:`RehearsalReport`), and the UI's view of it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kafka_reassign.planning.estimate import SOURCE_REHEARSAL, Estimate
from kafka_reassign.units import fmt_bytes, format_duration


@dataclass
class RehearsalReport:
    """What a rehearsal predicts for a real run.

    :param predicted_seconds: first reassignment submitted -> last one completed (simulated
        seconds); None when the run did not finish (``outcome`` says why)
    :param formula: the KIP-73 formula estimate of the same run (JSON), for comparison
    :param timeline: [simulated seconds since the first submission, bytes copied so far]
    :param slowest: the partitions that were moving longest
    :param isr_risks: in-sync replica sets that shrank, or fell below min.insync.replicas
    :param urp_peak: most under-replicated partitions at once (moving ones included)
    :param peak_in_flight: broker -> {"in": most moves into it at once, "out": out of it}
    :param outcome: ``done``, or the error that ended the run (stall, timeout...)
    """

    predicted_seconds: float | None
    bound_seconds: float
    formula: dict[str, Any]
    timeline: list[list[float]]
    slowest: list[dict[str, Any]]
    isr_risks: list[dict[str, Any]]
    urp_peak: int
    peak_in_flight: dict[int, dict[str, int]]
    outcome: str = "done"
    partitions: int = 0
    steps: int = 0
    throttle: int | None = None
    bytes_total: int = 0
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """Predicted moving time / the fixed-leader bound (``bound_seconds``)."""
        if self.predicted_seconds is None or not self.bound_seconds:
            return None
        return self.predicted_seconds / self.bound_seconds

    @property
    def source_free_seconds(self) -> float | None:
        """The source-free bound of the same run (the formula's; None in older reports)."""
        value = self.formula.get("source_free_seconds") if self.formula else None
        return None if value is None else float(value)

    @property
    def source_free_ratio(self) -> float | None:
        """Predicted moving time / the source-free bound."""
        free = self.source_free_seconds
        if self.predicted_seconds is None or not free:
            return None
        return self.predicted_seconds / free

    def estimate(self) -> Estimate:
        """The rehearsal's prediction as an :class:`Estimate` (source ``rehearsal``)."""
        formula = Estimate.from_json(self.formula) if self.formula else None
        return Estimate(seconds=math.inf if self.predicted_seconds is None else self.predicted_seconds,
                        bound_seconds=self.bound_seconds, source=SOURCE_REHEARSAL,
                        source_free_seconds=self.source_free_seconds,
                        busiest_broker=formula.busiest_broker if formula else None, bytes_total=self.bytes_total,
                        stalled=[] if self.predicted_seconds is not None else [self.outcome],
                        detail={"cpu_seconds": round(self.cpu_seconds, 2), "outcome": self.outcome})

    def format(self) -> str:
        """The printable report (CLI, task log)."""
        ratio = f"{self.ratio:.2f}x" if self.ratio is not None else "-"
        remote = (self.formula.get("detail") or {}).get("remote_bytes") if self.formula else None
        left = f" (+{fmt_bytes(remote)} in remote storage, not copied)" if remote else ""
        lines = [f"Rehearsal of {self.partitions} partition(s), {self.steps} step(s), {fmt_bytes(self.bytes_total)} "
                 f"to copy{left}, throttle {fmt_bytes(self.throttle) + '/s' if self.throttle else 'none'}",
                 f"  predicted moving time: {format_duration(self.predicted_seconds)} ({ratio} the fixed-leader bound "
                 f"{format_duration(self.bound_seconds)}{self._source_free_text()}); outcome: {self.outcome}"]
        if self.formula:
            lines.append(f"  formula said: {Estimate.from_json(self.formula).describe()}")
        lines.append(f"  rehearsal cost: {self.cpu_seconds:.1f} s CPU, {self.wall_seconds:.1f} s wall for "
                     f"{format_duration(self.sim_seconds)} simulated")
        if self.timeline:
            lines.append("Bytes copied over time:")
            step = max(1, len(self.timeline) // 10)
            for t, b in self.timeline[::step] + ([self.timeline[-1]] if (len(self.timeline) - 1) % step else []):
                share = b / self.bytes_total if self.bytes_total else 1.0
                lines.append(f"  {format_duration(t):>12}  {fmt_bytes(b):>10}  {'#' * int(share * 40)}")
        if self.slowest:
            lines.append("Slowest partitions:")
            for s in self.slowest:
                lines.append(f"  {s['partition']}: {format_duration(s['seconds'])} moving, {fmt_bytes(s['bytes'])}")
        lines.append(f"Under-replicated partitions at most: {self.urp_peak} (moving partitions count until their "
                     "new replicas are in sync)")
        if self.isr_risks:
            lines.append("ISR risks:")
            lines += [f"  {r['partition']}: {r['what']} at {format_duration(r['at'])}" for r in self.isr_risks[:20]]
            if len(self.isr_risks) > 20:
                lines.append(f"  ... and {len(self.isr_risks) - 20} more")
        else:
            lines.append("ISR risks: none (no in-sync replica set shrank)")
        if self.peak_in_flight:
            busiest = sorted(self.peak_in_flight.items(), key=lambda kv: -(kv[1]["in"] + kv[1]["out"]))[:10]
            lines.append("Peak moves in flight per broker (in/out): " +
                         ", ".join(f"{b}: {v['in']}/{v['out']}" for b, v in busiest))
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _source_free_text(self) -> str:
        free = self.source_free_seconds
        if free is None:
            return ""
        ratio = f", {self.source_free_ratio:.2f}x" if self.source_free_ratio is not None else ""
        return f"; source-free bound {format_duration(free)}{ratio}"

    def to_json(self) -> dict[str, Any]:
        return {"predicted_seconds": self.predicted_seconds, "bound_seconds": self.bound_seconds,
                "source_free_seconds": self.source_free_seconds,
                "ratio": self.ratio, "formula": self.formula, "timeline": self.timeline, "slowest": self.slowest,
                "isr_risks": self.isr_risks, "urp_peak": self.urp_peak,
                "peak_in_flight": {str(b): v for b, v in sorted(self.peak_in_flight.items())},
                "outcome": self.outcome, "partitions": self.partitions, "steps": self.steps,
                "throttle": self.throttle, "bytes_total": self.bytes_total, "sim_seconds": self.sim_seconds,
                "wall_seconds": self.wall_seconds, "cpu_seconds": self.cpu_seconds, "warnings": self.warnings,
                "estimate": self.estimate().to_json(), "text": self.format()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RehearsalReport":
        return cls(predicted_seconds=d.get("predicted_seconds"), bound_seconds=float(d.get("bound_seconds") or 0),
                   formula=dict(d.get("formula") or {}), timeline=[list(x) for x in d.get("timeline", [])],
                   slowest=list(d.get("slowest", [])), isr_risks=list(d.get("isr_risks", [])),
                   urp_peak=int(d.get("urp_peak", 0)),
                   peak_in_flight={int(b): dict(v) for b, v in (d.get("peak_in_flight") or {}).items()},
                   outcome=d.get("outcome", "done"), partitions=int(d.get("partitions", 0)),
                   steps=int(d.get("steps", 0)), throttle=d.get("throttle"), bytes_total=int(d.get("bytes_total", 0)),
                   sim_seconds=float(d.get("sim_seconds", 0)), wall_seconds=float(d.get("wall_seconds", 0)),
                   cpu_seconds=float(d.get("cpu_seconds", 0)), warnings=list(d.get("warnings", [])))


def estimate_view(xcom_values: Iterable[Any]) -> dict[str, Any] | None:
    """What the UI shows next to the plan summary, from a run's XCom values (the hook for the page).

    The prepare task's ``prepared`` XCom carries ``estimate`` (its ``source`` says rehearsal or
    formula) and, with ``rehearse``, the ``rehearsal`` report.

    :param xcom_values: the run's deserialized XCom values, any order
    :returns: {"estimate": {...}, "rehearsal": {...} | None} or None when the run has no prepared run
    """
    for value in xcom_values:
        if isinstance(value, dict) and isinstance(value.get("estimate"), dict) and "steps" in value:
            rehearsal = value.get("rehearsal")
            if isinstance(rehearsal, dict):
                rehearsal = {k: v for k, v in rehearsal.items() if k != "estimate"}
            return {"estimate": value["estimate"], "rehearsal": rehearsal}
    return None
