"""Prepare a run: read and validate, compute its KIP-435 steps and throttle rates; writes nothing.

:class:`PreparedRun` is everything a run will do, computed before any write; ``print(prepare(...).report())``
is a dry run. The steps after it: :func:`kafka_reassign.throttle.apply.apply_throttle`, the executor
(:func:`kafka_reassign.run.reassign.run_reassignment` chains them), :mod:`kafka_reassign.run.cancel`.
"""
from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from kafka_reassign.cluster.port import ClusterReader, KafkaAdminPort
from kafka_reassign.cluster.snapshot import with_remote_sizes
from kafka_reassign.cluster.state import ClusterState, TopicPartition, with_produce_rates
from kafka_reassign.execution.limits import ExecutionLimits
from kafka_reassign.execution.ownership import SubmittedTargets
from kafka_reassign.execution.sourcing import choose_sources, with_lead_steps
from kafka_reassign.execution.steps import StepMove, plan_all_steps, steps_from_rows, steps_to_rows
from kafka_reassign.planning.estimate import Estimate, Limits, estimate_run
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.planning.plan_checks import validated_plan
from kafka_reassign.planning.preflight import (PreflightReport, ProduceRates, enforce, measure_produce_rates,
                                               preflight)
from kafka_reassign.planning.validate import ReassignParams, validate_params
from kafka_reassign.throttle.adaptive import floor_over_stall
from kafka_reassign.throttle.apply import read_throttle_configs
from kafka_reassign.throttle.specs import (ConfigChange, CurrentConfigs, ThrottleSpec, effective_configs,
                                           throttle_changes)
from kafka_reassign.units import fmt_bytes, fmt_ids, format_duration

if TYPE_CHECKING:
    from kafka_reassign.rehearsal.report import RehearsalReport

#: ``(admin, plan, params, produce rates) -> RehearsalReport``: the rehearsal, injected by the caller.
Rehearser = Callable[[ClusterReader, ReassignmentPlan, ReassignParams, Mapping[TopicPartition, float]], Any]

log = logging.getLogger(__name__)


def new_run_id() -> str:
    """A readable unique run id, e.g. ``kr-20261121T2331-3f9a``."""
    return f"kr-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"


@dataclass
class PreparedRun:
    """Everything a run will do, computed before any write (travels through XCom as JSON).

    :param plan: the validated plan
    :param params: validated parameters
    :param steps: every KIP-435 step, each partition's steps in order (the executor's queue)
    :param throttle_spec: the rates to set (the replica lists follow the steps in flight)
    :param throttle_changes: the exact rate config writes as of prepare time (with prior values)
    :param warnings: non-fatal findings (produce rate vs throttle, partitions at target...)
    :param notes: throttle merge notes (kept lower rates, wildcards)
    :param estimated_seconds: predicted moving time (``estimate`` says how it was obtained)
    :param estimate: the :class:`~kafka_reassign.planning.estimate.Estimate` as JSON (formula, or a rehearsal's)
    :param preflight: the stall check (:class:`~kafka_reassign.planning.preflight.PreflightReport` as JSON)
    :param rehearsal: the rehearsal's report (:class:`~kafka_reassign.rehearsal.report.RehearsalReport` as
        JSON) when ``rehearse`` was set; then ``estimate`` is the rehearsal's
    :param leaders: partition -> leader when prepared (the broker sending a step's bytes)
    :param urp: partitions under-replicated when prepared
    """

    plan: ReassignmentPlan
    params: ReassignParams
    steps: list[StepMove]
    throttle_spec: ThrottleSpec
    throttle_changes: list[ConfigChange]
    cluster_id: str | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    estimated_seconds: float = 0.0
    estimate: dict[str, Any] | None = None
    preflight: dict[str, Any] | None = None
    rehearsal: dict[str, Any] | None = None
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    urp: list[TopicPartition] = field(default_factory=list)

    def limits(self, strategy: str | None = None) -> ExecutionLimits:
        return ExecutionLimits.from_params(self.params, strategy)

    def report(self, max_steps: int = 500) -> str:
        """A printable dry-run report: limits, throttle, steps and the exact config changes."""
        steps = self.steps
        moving = {s.key for s in steps}
        total = sum(s.bytes_to_copy for s in steps)
        p = self.params
        lines = [
            f"Reassignment of {len(self.plan.moves)} partition(s): {len(moving)} to move, "
            f"{len(self.plan.moves) - len(moving)} already at target",
            f"  {len(steps)} KIP-435 step(s), {fmt_bytes(total)} to copy, "
            f"{sum(1 for s in steps if s.moves_leader)} leader movement(s)",
            f"  in flight at once: {p.max_partition_movements} step(s) in the cluster, {p.max_movements_per_broker} "
            f"per broker, {p.max_leader_movements} leader movement(s); a step's successor starts when it is done",
        ]
        lines += self._throttle_lines()
        for s in steps[:max_steps]:
            lines.append("  " + describe_step(s))
        if len(steps) > max_steps:
            lines.append(f"  ... and {len(steps) - max_steps} more step(s)")
        lines.append(f"Config changes ({len(self.throttle_changes)}):")
        lines += [f"  {c.describe()}" for c in self.throttle_changes] or ["  (none)"]
        if self.throttle_spec.rate is not None and steps:
            lines.append("  + leader/follower.replication.throttled.replicas entries of each step while it is in "
                         "flight (added on submission, removed on completion, prior values recorded)")
        for title, items in (("Notes", self.notes), ("Warnings", self.warnings)):
            if items:
                lines.append(f"{title}:")
                lines += [f"  {n}" for n in items]
        if self.rehearsal:
            lines.append(self.rehearsal.get("text", ""))
        return "\n".join(lines)

    def _throttle_lines(self) -> list[str]:
        spec = self.throttle_spec
        if spec.rate is None:
            out = ["  throttle: NONE (replication is not throttled)"]
        else:
            out = [f"  throttle: {fmt_bytes(spec.rate)}/s on broker(s) "
                   f"{','.join(map(str, sorted(spec.rate_brokers))) or '-'}"]
        if spec.log_dir_brokers:
            out.append(f"  log-dir move throttle: {fmt_bytes(spec.log_dir_rate or 0)}/s on broker(s) "
                       f"{','.join(map(str, sorted(spec.log_dir_brokers)))}")
        if self.estimate is not None:
            out.append(f"  {Estimate.from_json(self.estimate).describe()}")
        else:
            out.append(f"  estimated moving time: {format_duration(self.estimated_seconds)}")
        if self.preflight is not None:
            out.append(f"  pre-flight: {self.preflight.get('rates')}; {self.preflight.get('stall_count', 0)} "
                       f"stalling, {self.preflight.get('slow_count', 0)} slow move(s)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"plan": self.plan.to_json(), "params": self.params.to_json(), "steps": steps_to_rows(self.steps),
                "throttle_spec": self.throttle_spec.to_json(),
                "throttle_changes": [c.to_json() for c in self.throttle_changes], "cluster_id": self.cluster_id,
                "warnings": list(self.warnings), "notes": list(self.notes),
                "estimated_seconds": None if self.estimated_seconds == float("inf") else self.estimated_seconds,
                "estimate": self.estimate, "preflight": self.preflight, "rehearsal": self.rehearsal,
                "leaders": [[t, p, b] for (t, p), b in sorted(self.leaders.items())],
                "urp": [[t, p] for t, p in self.urp]}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | str) -> "PreparedRun":
        d: Mapping[str, Any] = json.loads(raw) if isinstance(raw, str) else raw
        est = d.get("estimated_seconds")
        return cls(plan=ReassignmentPlan.from_json(d["plan"]), params=validate_params(d["params"]),
                   steps=steps_from_rows(d["steps"]), throttle_spec=ThrottleSpec.from_json(d["throttle_spec"]),
                   throttle_changes=[ConfigChange.from_json(c) for c in d["throttle_changes"]],
                   cluster_id=d.get("cluster_id"), warnings=list(d.get("warnings", [])),
                   notes=list(d.get("notes", [])), estimated_seconds=float("inf") if est is None else est,
                   estimate=d.get("estimate"), preflight=d.get("preflight"), rehearsal=d.get("rehearsal"),
                   leaders={(t, int(p)): int(b) for t, p, b in d.get("leaders", [])},
                   urp=[(t, int(p)) for t, p in d.get("urp", [])])


def describe_step(s: StepMove) -> str:
    """One line per step for reports: replicas before -> after, what is added and dropped."""
    if s.is_log_dir_only:
        dirs = ", ".join(f"broker {br} -> {d}" for br, d in sorted(s.wanted_dirs().items()))
        return f"{s.name}: log dirs: {dirs}"
    extra = []
    if s.adding:
        extra.append("+" + ",".join(map(str, s.adding)))
    if s.removing:
        extra.append("-" + ",".join(map(str, s.removing)))
    if s.moves_leader:
        extra.append(f"preferred leader {s.current[0]}->{s.target[0]}")
    return (f"{s.name}: {fmt_ids(s.current)} -> {fmt_ids(s.target)}  ({' '.join(extra)}; "
            f"step {s.step_index + 1}/{s.step_count}, {fmt_bytes(s.size_bytes)})")


def prepare(admin: ClusterReader, plan: ReassignmentPlan | dict[str, Any] | str,
            params: ReassignParams | Mapping[str, Any] | None = None, *, run_id: str | None = None,
            own_targets: SubmittedTargets | None = None,
            state: ClusterState | None = None,
            produce_rates: Mapping[TopicPartition, float] | None = None,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic,
            rehearser: Rehearser | None = None) -> PreparedRun:
    """Validate the plan against the live cluster and compute the steps and throttle changes.

    Writes nothing: a dry run is ``print(prepare(...).report())``.

    :param admin: the cluster's reads (a KafkaAdmin, or a SnapshotView offline: see :mod:`kafka_reassign.cluster.port`)
    :param plan: the plan (object, JSON text or parsed)
    :param params: run parameters (validated here)
    :param run_id: the run (named in messages)
    :param own_targets: targets this run already submitted (resume)
    :param state: a cluster state already read (default: read it now)
    :param produce_rates: (topic, partition) -> bytes/s, e.g. ``rates_from_snapshot(snapshot)``,
        for the estimate and the pre-flight stall check; without them the rates of the moving
        partitions are measured on the cluster over ``produce_sample_seconds``
    :raises ParamError, PlanValidationError: listing every problem
    :param sleep: waits out the produce-rate sampling window
    :param clock: the cluster's clock for the sampling window (a simulator's simulated time)
    :param rehearser: runs the plan on a simulated copy of the cluster when ``params.rehearse``
        (:func:`kafka_reassign.rehearsal.rehearse.rehearse_live`; passed in because the rehearsal
        itself runs through this module)
    :raises PreflightError: a move would stall at this throttle (unless ``allow_stalling_moves``)
    """
    params = validate_params(params)
    if params.rehearse and rehearser is None:
        raise ValueError("prepare(rehearse=True) needs a rehearser")
    state = state if state is not None else admin.cluster_state()
    plan, warnings = validated_plan(plan, state, allow_rf_change=params.allow_rf_change, own_run_id=run_id,
                                    allow_internal_topics=params.allow_internal_topics, own_targets=own_targets)
    steps = plan_all_steps(plan.moves, state)
    if params.leader_sourcing:
        steps = with_lead_steps(steps, choose_sources(steps, state))
    ExecutionLimits.from_params(params).validate(steps)
    spec, changes, notes, configs = _throttle_rates(admin, steps, params)
    rates = _produce_rates(admin, state, steps, params, produce_rates, sleep, clock)
    state = with_produce_rates(state, rates.rates)
    # per_step: the executor lists only the moves in flight as throttled replicas.
    check = preflight(steps, state, params.throttle_bytes_per_sec, rates,
                      log_dir_throttle=params.log_dir_throttle_bytes_per_sec,
                      current_configs=configs, per_step=True)
    warnings += enforce(check, params.allow_stalling_moves)  # raises PreflightError: nothing written
    params = _adaptive_floor(params, check.smallest_throttle, warnings)
    if params.throttle_bytes_per_sec is None and any(s.adding for s in steps):
        warnings.append("no throttle: replication traffic is unbounded and may slow producers and consumers")
    estimate, rehearsal = _estimate(admin, plan, params, steps, state, check, rates, rehearser)
    leaders, urp = _leaders_and_urp(steps, state)
    return PreparedRun(plan=plan, params=params, steps=steps, throttle_spec=spec, throttle_changes=changes,
                       cluster_id=state.cluster_id, warnings=warnings, notes=notes,
                       estimated_seconds=estimate.seconds, estimate=estimate.to_json(), preflight=check.to_json(),
                       rehearsal=None if rehearsal is None else rehearsal.to_json(), leaders=leaders, urp=urp)


def _adaptive_floor(params: ReassignParams, stall_point: int | None, warnings: list[str]) -> ReassignParams:
    """The adaptive throttle's floor never below the pre-flight stall point: raised to it (with a
    note in ``warnings``), or the run refused when the ceiling is below it (ParamError, nothing written)."""
    if not params.adaptive_throttle:
        return params
    floor, note = floor_over_stall(params.throttle_min_bytes_per_sec, params.throttle_max_bytes_per_sec, stall_point)
    if note:
        log.info(note)
        warnings.append(note)
    return replace(params, throttle_min_bytes_per_sec=floor)


def _throttle_rates(admin: ClusterReader, steps: list[StepMove], params: ReassignParams
                    ) -> tuple[ThrottleSpec, list[ConfigChange], list[str], CurrentConfigs]:
    """(the rates to set, their config writes, merge notes, the throttle configs in effect now)."""
    # Rates only: the replica lists name each step while it is in flight (replica_throttle).
    spec = ThrottleSpec.for_moves(steps, params.throttle_bytes_per_sec, params.log_dir_throttle_bytes_per_sec,
                                  replica_lists=False)
    notes: list[str] = []
    if spec.empty:
        return spec, [], notes, effective_configs({}, {})
    current, inherited = read_throttle_configs(admin, spec)
    changes = throttle_changes(spec, current, notes, inherited)
    return spec, changes, notes, effective_configs(current, inherited)


def _estimate(admin: ClusterReader, plan: ReassignmentPlan, params: ReassignParams, steps: list[StepMove],
              state: ClusterState, check: PreflightReport, rates: ProduceRates,
              rehearser: Rehearser | None) -> tuple[Estimate, RehearsalReport | None]:
    """The moving-time estimate (a rehearsal's when one is made) and the rehearsal report (or None)."""
    limits = Limits(rate=params.throttle_bytes_per_sec, log_dir_rate=params.log_dir_throttle_bytes_per_sec,
                    broker_rates=check.kept_lower)
    state = with_remote_sizes(admin, state, {s.topic for s in steps})  # tiered: bytes a move leaves remote
    # The pre-flight check's loads are of these steps on this state: remote sizes change no field they read.
    # With a throttle it also made every stall point of them at these limits (without one it kept the
    # log-dir ones only): its stalling ones are the estimate's.
    stalls = check.stalls if check.throttle is not None else None
    estimate = estimate_run(steps, state, limits, check.loads, stalls)  # the planner summary's estimate too
    if rehearser is not None and params.rehearse and any(s.adding or s.is_log_dir_only for s in steps):
        rehearsal = rehearser(admin, plan, params, rates.rates)
        return rehearsal.estimate(), rehearsal  # a rehearsal, when made, is the estimate shown
    return estimate, None


def _leaders_and_urp(steps: list[StepMove], state: ClusterState) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
    """Each moving partition's leader now (the source of its copies) and the under-replicated ones."""
    leaders: dict[TopicPartition, int] = {}
    urp: list[TopicPartition] = []
    for key in dict.fromkeys(s.key for s in steps):
        p = state.partition(*key)
        if p is not None:
            leaders[key] = p.leader
            if len(p.isr) < len(p.replicas):
                urp.append(key)
    return leaders, urp


def _produce_rates(admin: ClusterReader, state: ClusterState, steps: list[StepMove], params: ReassignParams,
                   given: Mapping[TopicPartition, float] | None, sleep: Callable[[float], None],
                   clock: Callable[[], float]) -> ProduceRates:
    """Rates given (a snapshot's), else measured on the cluster, else none (said in a warning)."""
    if given is not None:
        return ProduceRates(rates=dict(given), source="given")
    moving = sorted({s.key for s in steps if s.adding or s.is_log_dir_only})
    if params.produce_sample_seconds > 0 and moving and params.throttle_bytes_per_sec is not None:
        if not isinstance(admin, KafkaAdminPort):  # a snapshot's view samples nothing: its rates are given
            raise ValueError("measuring produce rates needs a live cluster's admin; give produce_rates")
        return measure_produce_rates(admin, state, moving, params.produce_sample_seconds, sleep=sleep, clock=clock)
    return ProduceRates(rates={}, source="none")
