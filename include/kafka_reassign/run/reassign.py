"""The orchestration steps a reassignment run is made of; each is idempotent.

``prepare`` (read + validate + KIP-435 steps + throttle rates; writes nothing) ->
``apply_throttle`` (record prior values durably, then set the rates) -> the pipelined
executor (:mod:`kafka_reassign.execution.executor`: a window of steps in flight, throttled-replica
lists following it) -> finally ``restore_throttle`` (and ``cancel_in_flight`` first when the
run failed and asked for it).

The Airflow operators call these one per task; :func:`run_reassignment` chains them for
the command line and the tests. A run id tags what a run owns: its throttle record, its
execution state and (through the plan's deterministic steps) the reassignments it started.
"""
from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

from kafka_reassign.errors import ReassignError
from kafka_reassign.execution.store import ExecutionStore
from kafka_reassign.execution.executor import DONE, ExecutionLimits, MoveExecutor, run_execution
from kafka_reassign.execution.outcome import Outcome
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.execution.progress import ProgressView
from kafka_reassign.throttle.record import RecordStore, ThrottleRecord, submitted_targets
from kafka_reassign.throttle.replica_lists import ReplicaThrottle
from kafka_reassign.throttle.restore import RestoreResult, finish_hint, restore_throttle
from kafka_reassign.cluster.state import ClusterState, TopicPartition, with_produce_rates
from kafka_reassign.execution.steps import StepMove, plan_all_steps, steps_from_rows, steps_to_rows
from kafka_reassign.planning.estimate import Estimate, Limits, estimate_batches
from kafka_reassign.planning.preflight import ProduceRates, enforce, measure_produce_rates, preflight
from kafka_reassign.throttle.specs import (BROKER_KEYS, TOPIC_KEYS, ConfigChange, InheritedConfigs, ThrottleSpec,
                                     effective_configs, fmt_bytes, restore_changes, throttle_changes)
from kafka_reassign.throttle.guard import ThrottleGuard
from kafka_reassign.planning.validate import ReassignParams, validate_params, validate_plan

#: ``(admin, plan, params, produce rates) -> RehearsalReport``: the rehearsal, injected by the caller.
Rehearser = Callable[[Any, ReassignmentPlan, ReassignParams, Mapping[TopicPartition, float]], Any]

log = logging.getLogger(__name__)

#: Polls between two checks of the run's throttle (ThrottleGuard) while moves are in flight.
GUARD_EVERY_POLLS = 1


def new_run_id() -> str:
    """A readable unique run id, e.g. ``kr-20261121T2331-3f9a``."""
    return f"kr-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"


def _fmt(ids: Iterable[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"


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
    :param rehearsal: the rehearsal's report (:class:`~kafka_reassign.rehearsal.rehearse.RehearsalReport` as
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

    def own_targets(self) -> dict[TopicPartition, list[tuple[int, ...]]]:
        """Every replica list this run may submit, per partition (to recognise our moves)."""
        out: dict[TopicPartition, list[tuple[int, ...]]] = {}
        for s in self.steps:
            out.setdefault(s.key, []).append(tuple(s.target))
        for m in self.plan.moves:
            out.setdefault(m.key, []).append(tuple(m.replicas))
        return out

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
            out.append(f"  estimated moving time: {self.estimated_seconds:.0f} s")
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
    def from_json(cls, d: Mapping[str, Any] | str) -> "PreparedRun":
        if isinstance(d, str):
            d = json.loads(d)
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
    return (f"{s.name}: {_fmt(s.current)} -> {_fmt(s.target)}  ({' '.join(extra)}; "
            f"step {s.step_index + 1}/{s.step_count}, {fmt_bytes(s.size_bytes)})")


def _read_throttle_configs(admin: Any, spec_or_resources: ThrottleSpec | tuple[list[int], list[str]]
                           ) -> tuple[dict[tuple[str, str], dict[str, str | None]], InheritedConfigs]:
    """(per-resource throttle values, broker values inherited from the cluster default or static config)."""
    brokers, topics = spec_or_resources.resources() if isinstance(spec_or_resources, ThrottleSpec) \
        else spec_or_resources
    out: dict[tuple[str, str], dict[str, str | None]] = {}
    inherited: InheritedConfigs = {}
    if brokers:
        read = admin.describe_sourced(broker_ids=brokers, topics=(), keys=BROKER_KEYS)
        out.update(read.values)
        inherited = read.inherited
    if topics:
        out.update(admin.describe_configs(broker_ids=(), topics=topics, keys=TOPIC_KEYS))
    return out, inherited


def prepare(admin: Any, plan: ReassignmentPlan | dict[str, Any] | str,
            params: ReassignParams | Mapping[str, Any] | None = None, *, run_id: str | None = None,
            own_targets: Mapping[TopicPartition, Any] | None = None,
            state: ClusterState | None = None,
            produce_rates: Mapping[TopicPartition, float] | None = None,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic,
            rehearser: Rehearser | None = None) -> PreparedRun:
    """Validate the plan against the live cluster and compute the steps and throttle changes.

    Writes nothing: a dry run is ``print(prepare(...).report())``.

    :param admin: a :class:`~kafka_reassign.cluster.admin.KafkaAdmin` (or anything with its methods)
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
    warnings = validate_plan(plan, state, allow_rf_change=params.allow_rf_change, own_run_id=run_id,
                             allow_internal_topics=params.allow_internal_topics, own_targets=own_targets)
    if not isinstance(plan, ReassignmentPlan):
        plan = ReassignmentPlan.from_json(plan)
    steps = plan_all_steps(plan.moves, state)
    ExecutionLimits.from_params(params).validate(steps)
    # Rates only: the replica lists name each step while it is in flight (replica_throttle).
    spec = replace(ThrottleSpec.for_moves(steps, params.throttle_bytes_per_sec, params.log_dir_throttle_bytes_per_sec),
                   leader={}, follower={})
    notes: list[str] = []
    current, inherited = _read_throttle_configs(admin, spec) if not spec.empty else ({}, {})
    changes = throttle_changes(spec, current, notes, inherited) if not spec.empty else []
    rates = _produce_rates(admin, state, steps, params, produce_rates, sleep, clock)
    state = with_produce_rates(state, rates.rates)
    # per_step: the executor lists only the moves in flight as throttled replicas.
    check = preflight(steps, state, params.throttle_bytes_per_sec, rates,
                      log_dir_throttle=params.log_dir_throttle_bytes_per_sec,
                      current_configs=effective_configs(current, inherited), per_step=True)
    warnings += enforce(check, params.allow_stalling_moves)  # raises PreflightError: nothing written
    if params.throttle_bytes_per_sec is None and any(s.adding for s in steps):
        warnings.append("no throttle: replication traffic is unbounded and may slow producers and consumers")
    limits = Limits(rate=params.throttle_bytes_per_sec, log_dir_rate=params.log_dir_throttle_bytes_per_sec,
                    broker_rates=check.kept_lower)
    estimate, _ = estimate_batches([steps], state, limits, pipelined=True, per_step=True)
    rehearsal = None
    if rehearser is not None and params.rehearse and any(s.adding or s.is_log_dir_only for s in steps):
        rehearsal = rehearser(admin, plan, params, rates.rates)
        estimate = rehearsal.estimate()  # a rehearsal, when made, is the estimate shown
    leaders, urp = _leaders_and_urp(steps, state)
    return PreparedRun(plan=plan, params=params, steps=steps, throttle_spec=spec, throttle_changes=changes,
                       cluster_id=state.cluster_id, warnings=warnings, notes=notes,
                       estimated_seconds=estimate.seconds, estimate=estimate.to_json(), preflight=check.to_json(),
                       rehearsal=None if rehearsal is None else rehearsal.to_json(), leaders=leaders, urp=urp)


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


def _produce_rates(admin: Any, state: ClusterState, steps: list[StepMove], params: ReassignParams,
                   given: Mapping[TopicPartition, float] | None, sleep: Callable[[float], None],
                   clock: Callable[[], float]) -> ProduceRates:
    """Rates given (a snapshot's), else measured on the cluster, else none (said in a warning)."""
    if given is not None:
        return ProduceRates(rates=dict(given), source="given")
    moving = sorted({s.key for s in steps if s.adding or s.is_log_dir_only})
    if params.produce_sample_seconds > 0 and moving and params.throttle_bytes_per_sec is not None:
        return measure_produce_rates(admin, state, moving, params.produce_sample_seconds, sleep=sleep, clock=clock)
    return ProduceRates(rates={}, source="none")


def apply_throttle(admin: Any, prepared: PreparedRun, store: RecordStore, run_id: str, *,
                   adopt_stale_records: bool = True) -> ThrottleRecord:
    """Record the prior values durably, then write the throttle. Idempotent.

    A second call for the same run reuses the recorded prior values (never records our own
    values as "prior") and writes only what is missing. Unrestored records of earlier runs on
    the same cluster (a run killed before its cleanup) are adopted: their prior values become
    ours, so restoring this run also cleans up what they left.

    :param admin: KafkaAdmin
    :param prepared: from :func:`prepare`
    :param store: durable record store
    :param run_id: this run
    :param adopt_stale_records: take over unrestored records of other runs on this cluster
    :returns: the record (also in ``store``)
    """
    spec = prepared.throttle_spec
    record = store.get(run_id)
    if record is not None and record.restored:
        log.info("throttle record of %s was restored before; applying the throttle again", run_id)
        record = None
    resources = spec.resources()
    if record is not None:
        brokers = {int(c.name) for c in record.changes if c.resource_type == "broker"} | set(resources[0])
        topics = {c.name for c in record.changes if c.resource_type == "topic"} | set(resources[1])
        current, inherited = _read_throttle_configs(admin, (sorted(brokers), sorted(topics)))
        # Keys the spec needs beyond the record (not expected, but never lose a prior value).
        recorded = {(c.resource_type, c.name, c.key) for c in record.changes}
        extra = [c for c in throttle_changes(spec, current, inherited=inherited)
                 if (c.resource_type, c.name, c.key) not in recorded]
        if extra:
            record.changes.extend(extra)
            store.put(record)
    else:
        adopted: list[ThrottleRecord] = []
        if adopt_stale_records:
            adopted = [r for r in store.list_unrestored() if r.run_id != run_id and (
                r.cluster_id is None or prepared.cluster_id is None or r.cluster_id == prepared.cluster_id)]
        brokers = set(resources[0]) | {int(c.name) for r in adopted for c in r.changes if c.resource_type == "broker"}
        topics = set(resources[1]) | {c.name for r in adopted for c in r.changes if c.resource_type == "topic"}
        current, inherited = _read_throttle_configs(admin, (sorted(brokers), sorted(topics)))
        # What the configs would be without the stale runs' writes still in place.
        base: dict[tuple[str, str, str], str | None] = {}
        for r in adopted:  # oldest first: the oldest prior is the real original value
            for c in r.changes:
                k = (c.resource_type, c.name, c.key)
                if (current.get((c.resource_type, c.name)) or {}).get(c.key) == c.value:
                    base.setdefault(k, c.prior)
        virtual = {res: dict(vals) for res, vals in current.items()}
        for (rt, name, key), prior in base.items():
            virtual.setdefault((rt, name), {})[key] = prior
        changes = throttle_changes(spec, virtual, inherited=inherited)
        touched = {(c.resource_type, c.name, c.key) for c in changes}
        for (rt, name, key), prior in base.items():
            if (rt, name, key) not in touched:
                # Left by a stale run and not needed by us: restore it with ours.
                changes.append(ConfigChange(rt, name, key, prior, (current.get((rt, name)) or {}).get(key)))
        record = ThrottleRecord.new(run_id, prepared.cluster_id, changes)
        if adopted:
            record.notes.append("adopted unrestored throttle records of " + ", ".join(r.run_id for r in adopted))
        store.put(record)  # durable BEFORE the first write
        for r in adopted:
            r.notes.append(f"superseded by run {run_id}, which will restore these values")
            r.restored = True
            r.restored_at = time.time()
            store.put(r)
    to_write = [c for c in record.changes
                if c.value is not None and (current.get((c.resource_type, c.name)) or {}).get(c.key) != c.value]
    if to_write:
        log.info("run %s: writing %d throttle config(s)", run_id, len(to_write))
        for c in to_write:
            log.info("  %s", c.describe())
        admin.alter_configs(to_write)
    return record


def restore_unrestored(admin: Any, store: Any, cluster_id: str | None = None) -> list[RestoreResult]:
    """Restore every unrestored record (of ``cluster_id`` when given): the reconciler's job."""
    out = []
    for rec in store.list_unrestored():
        if cluster_id is not None and rec.cluster_id not in (None, cluster_id):
            continue
        out.append(restore_throttle(admin, store, rec.run_id))
    return out


def cancel_in_flight(admin: Any, what: PreparedRun | ReassignmentPlan,
                     state: ClusterState | None = None, *,
                     submitted: Mapping[TopicPartition, Iterable[tuple[int, ...]]] | None = None,
                     original: Mapping[TopicPartition, Sequence[int]] | None = None) -> dict[str, Any]:
    """Cancel (revert) in-flight reassignments that are ours; leave everyone else's alone.

    Kafka reverts a cancelled partition to ``replicas - adding``, which loses the original
    order (so the preferred leader can change). Where we know the order the step started
    from, we put it back with a reorder-only reassignment (no data moves).

    :param what: a prepared run (all its step targets) or a plan
        (final targets, and the first step from where each partition was)
    :param state: for min ISR when ``what`` is a plan (default: read)
    :param submitted: more targets that are ours (a run's record ``submitted``: the KIP-435
        steps a run died with, when only its plan is known)
    :param original: replica lists to put back in this order (where the steps are not known)
    :returns: {"cancelled": [...], "left": [...], "reordered": [...], "errors": {...}}
    """
    own: dict[TopicPartition, list[tuple[int, ...]]] = {}
    origin: dict[tuple[TopicPartition, tuple[int, ...]], tuple[int, ...]] = {}
    plan_targets: dict[TopicPartition, tuple[int, ...]] = {}
    steps = what.steps if isinstance(what, PreparedRun) else []
    for s in steps:
        own.setdefault(s.key, []).append(tuple(s.target))
        origin[(s.key, tuple(s.target))] = tuple(s.current)
    if isinstance(what, PreparedRun):
        for m in what.plan.moves:
            own.setdefault(m.key, []).append(tuple(m.replicas))
    elif isinstance(what, ReassignmentPlan):
        plan_targets = {m.key: tuple(m.replicas) for m in what.moves}
        own = {k: [v] for k, v in plan_targets.items()}
    for key, targets in (submitted or {}).items():
        own.setdefault(key, []).extend(tuple(t) for t in targets)
    in_flight = admin.list_partition_reassignments(list(own))
    if plan_targets and in_flight and state is None:
        state = admin.cluster_state(include_log_dirs=False, topics=sorted({t for t, _ in in_flight}))
    cancel: dict[TopicPartition, None] = {}
    restore_order: dict[TopicPartition, tuple[int, ...]] = {}
    left: list[str] = []
    for key, inf in in_flight.items():
        ours = tuple(inf.target) in own.get(key, [])
        if ours:
            cancel[key] = None
            restore_order[key] = origin.get((key, tuple(inf.target)),
                                            tuple((original or {}).get(key, inf.original)))
        else:
            left.append(f"{key[0]}-{key[1]}")
    out: dict[str, Any] = {"cancelled": [], "left": left, "reordered": [], "errors": {}}
    if cancel:
        for key, err in admin.alter_partition_reassignments(cancel).items():
            name = f"{key[0]}-{key[1]}"
            if err is None or err == "NO_REASSIGNMENT_IN_PROGRESS":
                out["cancelled"].append(name)
            else:
                out["errors"][name] = err
                restore_order.pop(key, None)
        reorder: dict[TopicPartition, list[int]] = {}
        for key, now in _replicas_after_cancel(admin, restore_order).items():
            want = restore_order[key]
            if now != want and set(now) == set(want):
                reorder[key] = list(want)
        for key, err in admin.alter_partition_reassignments(reorder).items():
            if err is None:
                out["reordered"].append(f"{key[0]}-{key[1]}")
            else:
                log.warning("could not restore the replica order of %s-%s: %s", key[0], key[1], err)
    dir_steps = [s for s in steps if s.is_log_dir_only]
    if dir_steps:
        # An intra-broker move is cancelled by asking for the dir the replica is in now.
        wanted = {(s.topic, s.partition, b): d for s in dir_steps for b, d in s.wanted_dirs().items()}
        rows = admin.describe_log_dirs(sorted({k[2] for k in wanted}), sorted({k[:2] for k in wanted}))
        home = {(r.topic, r.partition, r.broker): r.path for r in rows if not r.is_future}
        back = {k: home[k] for r in rows if r.is_future
                for k in [(r.topic, r.partition, r.broker)] if wanted.get(k) == r.path and k in home}
        for (t, p, b), err in admin.alter_replica_log_dirs(back).items():
            name = f"{t}-{p}@{b}"
            if err is None:
                out["cancelled"].append(name)
            else:
                out["errors"][name] = err
    if left:
        log.warning("not cancelling reassignments that are not ours: %s", ", ".join(left))
    return out


def _replicas_after_cancel(admin: Any, want: Mapping[TopicPartition, Sequence[int]],
                           timeout: float = 10.0) -> dict[TopicPartition, tuple[int, ...]]:
    """Replicas of cancelled partitions, once Metadata shows the revert (or ``timeout`` passed).

    Real Kafka answers Metadata from a broker's copy of the cluster metadata, a moment behind
    the controller: read at once after a cancel, it may still list the replicas being added,
    and the original order would not be put back.
    """
    deadline = time.monotonic() + timeout
    while want:
        now: dict[TopicPartition, tuple[int, ...]] = {}
        for t in admin.topic_metadata(sorted({k[0] for k in want})):
            now.update({(t.name, p.partition): tuple(p.replicas) for p in t.partitions if (t.name, p.partition) in want})
        if all(set(now.get(k, ())) == set(v) for k, v in want.items()) or time.monotonic() >= deadline:
            return now
        time.sleep(0.2)
    return {}


@dataclass
class RunResult:
    """Outcome of :func:`run_reassignment`."""

    run_id: str
    prepared: PreparedRun
    dry_run: bool = False
    progress: ProgressView | None = None
    restore: RestoreResult | None = None
    cancelled: dict[str, Any] | None = None
    error: str | None = None
    throttle_reapplied: int = 0

    @property
    def steps_done(self) -> int:
        return self.progress.steps_done if self.progress is not None else 0

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "dry_run": self.dry_run, "steps": len(self.prepared.steps),
                "steps_done": self.steps_done, "outcome": self.progress.outcome if self.progress else None,
                "error": self.error, "cancelled": self.cancelled,
                "restore": self.restore.to_json() if self.restore else None}


def executor_for(prepared: PreparedRun, run_id: str, record_store: RecordStore | None, *,
                 saved: Mapping[str, Any] | None = None, strategy: str | None = None,
                 produce_rates: Mapping[TopicPartition, float] | None = None) -> MoveExecutor:
    """The run's executor: its steps, limits and throttle record; resumed from ``saved`` state.

    :param record_store: where the throttle record is (None: the replica lists are not managed)
    :param saved: what an :class:`ExecutionStore` loaded for this run (``{"state": ...}``)
    """
    throttled = prepared.throttle_spec.rate is not None and record_store is not None
    ex = MoveExecutor(prepared.steps, prepared.limits(strategy), run_id=run_id,
                      throttle_rate=prepared.throttle_spec.rate,
                      replica_throttle=ReplicaThrottle(record_store, run_id, prepared.cluster_id) if throttled else None,
                      leaders=prepared.leaders, urp=prepared.urp, produce_rates=produce_rates,
                      record_store=record_store, cluster_id=prepared.cluster_id)
    if saved and saved.get("state"):
        ex.load_state(saved["state"])
    return ex


class RunFailed(ReassignError):
    """The execution ended with a dead step (stalled, failed, timed out); ``outcome`` says which."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(f"{outcome.value.replace('_', ' ')}: {message}")
        self.outcome = outcome


def run_reassignment(admin: Any, plan: ReassignmentPlan | dict[str, Any] | str,
                     params: ReassignParams | Mapping[str, Any] | None, store: RecordStore, *,
                     run_id: str | None = None, on_progress: Callable[[ProgressView], None] | None = None,
                     on_event: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.time,
                     produce_rates: Mapping[TopicPartition, float] | None = None,
                     exec_store: ExecutionStore | None = None, strategy: str | None = None,
                     should_stop: Callable[[ProgressView], bool] | None = None,
                     guard_every: int = GUARD_EVERY_POLLS, rehearser: Rehearser | None = None) -> RunResult:
    """Run a whole reassignment (what ``kafka-reassign execute`` does).

    The throttle is restored in a ``finally`` whatever happens; on failure with
    ``cancel_on_failure`` our in-flight moves are cancelled first. With ``exec_store`` the
    execution state is saved after every poll and a run with the same id resumes from it.

    :param guard_every: check the run's throttle every this many polls (0: never, for a
        rehearsal's private simulated cluster, which nobody else can change)
    :param rehearser: see :func:`prepare`
    :raises: the first error (validation, Kafka, :class:`RunFailed`) after cleaning up
    """
    run_id = run_id or new_run_id()
    say = on_event or (lambda m: log.info("%s", m))
    saved = exec_store.load(run_id) if exec_store is not None else None
    prepared = prepare(admin, plan, params, run_id=run_id, produce_rates=produce_rates, sleep=sleep, clock=clock,
                       own_targets=submitted_targets(store, None, run_id), rehearser=rehearser)
    result = RunResult(run_id=run_id, prepared=prepared, dry_run=prepared.params.dry_run)
    say(prepared.report())
    if prepared.params.dry_run:
        say("dry run: nothing written")
        return result
    if not prepared.steps:
        say(f"run {run_id}: nothing to move: every partition is already at its target; nothing written")
        return result
    executor = _resumed(prepared, run_id, store, saved, strategy, produce_rates, say)
    # The throttle guard reads the run's configs each poll: a removal is put back at once.
    guard = ThrottleGuard(admin, store, run_id, every=guard_every)

    def watch(view: ProgressView) -> None:
        # Every poll: put the throttle back if someone removed or raised it (raises if it cannot).
        for w in guard.check().warnings:
            say(f"warning: {w}")
        if on_progress is not None:
            on_progress(view)

    failure: BaseException | None = None
    try:
        apply_throttle(admin, prepared, store, run_id)
        say(f"run {run_id}: throttle set ({len(prepared.throttle_changes)} config change(s))")
        result.progress = run_execution(admin, executor, exec_store, poll_seconds=prepared.params.poll_interval_seconds,
                                        on_progress=watch, should_stop=should_stop, sleep=sleep, clock=clock)
        if executor.outcome() not in (Outcome.DONE, Outcome.IN_PROGRESS):
            raise RunFailed(executor.outcome(), executor.message)
    except BaseException as exc:
        failure = exc
        result.error = str(exc)
        _cancel_after_failure(admin, prepared, result, say)
        raise
    finally:
        _restore_after_run(admin, store, run_id, result, guard, failure, say)
    return result


def _resumed(prepared: PreparedRun, run_id: str, store: RecordStore, saved: Mapping[str, Any] | None,
             strategy: str | None, produce_rates: Mapping[TopicPartition, float] | None,
             say: Callable[[str], None]) -> MoveExecutor:
    """The run's executor, resumed from ``saved`` when it is the state of these very steps."""
    if saved and saved.get("state"):
        try:
            ex = executor_for(prepared, run_id, store, saved=saved, strategy=strategy, produce_rates=produce_rates)
            say(f"run {run_id}: resuming ({ex.counts[DONE]} step(s) already done)")
            return ex
        except ValueError as exc:  # the plan's steps changed since (partitions moved meanwhile)
            say(f"run {run_id}: not resuming the saved state ({exc}); starting from the cluster as it is")
    return executor_for(prepared, run_id, store, strategy=strategy, produce_rates=produce_rates)


def _cancel_after_failure(admin: Any, prepared: PreparedRun, result: RunResult, say: Callable[[str], None]) -> None:
    if not prepared.params.cancel_on_failure:
        return
    try:
        result.cancelled = cancel_in_flight(admin, prepared)
        say(f"run {result.run_id}: cancelled in-flight moves {result.cancelled['cancelled']}")
    except Exception as cexc:  # noqa: BLE001 - keep going to the throttle restore
        say(f"run {result.run_id}: cancelling in-flight moves failed: {cexc}")


def _restore_after_run(admin: Any, store: RecordStore, run_id: str, result: RunResult, guard: ThrottleGuard,
                       failure: BaseException | None, say: Callable[[str], None]) -> None:
    """Restore the throttle (kept while our moves go on after a failure without cancel)."""
    keep = failure is not None and not result.prepared.params.cancel_on_failure
    try:
        result.restore = restore_throttle(admin, store, run_id, keep_while_moving=keep)
        say(result.restore.message())
        for w in result.restore.warnings:
            say(f"warning: {w}")
    except Exception as rexc:  # noqa: BLE001
        say(f"run {run_id}: RESTORING THE THROTTLE FAILED: {rexc}; {finish_hint(run_id)}")
        if failure is None:
            raise ReassignError(f"throttle restore failed for run {run_id}: {rexc}") from rexc
    result.throttle_reapplied = len(guard.reapplied)
    if guard.summary():
        say(f"warning: {guard.summary()}")
    if failure is None and result.restore is not None and not result.restore.done:
        raise ReassignError(result.restore.message())
