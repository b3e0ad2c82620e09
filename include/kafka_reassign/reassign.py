"""The orchestration steps a reassignment run is made of; each is idempotent.

``prepare`` (read + validate + steps + batches + throttle changes; writes nothing) ->
``apply_throttle`` (record prior values durably, then write) -> for each batch:
``execute_batch`` (AlterPartitionReassignments / AlterReplicaLogDirs) -> ``poll_batch``
until done -> ``complete_batch`` (preferred leader election) -> finally
``restore_throttle`` (and ``cancel_in_flight`` first when the run failed and asked for it).

The Airflow operators call these one per task; :func:`run_reassignment` chains them for
the command line and the tests. A run id tags what a run owns: its throttle record, and
(through the plan's deterministic steps) the reassignments it started.
"""
from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from kafka_reassign.errors import (BatchExecutionError, BatchTimeoutError, KafkaAdminError, ReassignError,
                                   StallError)
from kafka_reassign.plan import ReassignmentPlan
from kafka_reassign.progress import BatchProgress, StallDetector
from kafka_reassign.record import RecordStore, ThrottleRecord, note_submitted, submitted_targets
from kafka_reassign.restore import RestoreResult, finish_hint, restore_throttle
from kafka_reassign.state import ClusterState, TopicPartition, with_produce_rates
from kafka_reassign.steps import Batch, StepMove, build_batches
from kafka_reassign.estimate import Estimate, Limits, estimate_batches
from kafka_reassign.preflight import ProduceRates, enforce, measure_produce_rates, preflight
from kafka_reassign.throttle import (BROKER_KEYS, TOPIC_KEYS, ConfigChange, ThrottleSpec, fmt_bytes, restore_changes,
                                     throttle_changes)
from kafka_reassign.throttle_guard import ThrottleGuard
from kafka_reassign.validate import ReassignParams, validate_params, validate_plan

log = logging.getLogger(__name__)


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
    :param batches: KIP-435 batches in execution order
    :param throttle_spec: what will be throttled
    :param throttle_changes: the exact config writes as of prepare time (with prior values)
    :param warnings: non-fatal findings (produce rate vs throttle, partitions at target...)
    :param notes: throttle merge notes (kept lower rates, wildcards)
    :param estimated_seconds: predicted moving time (``estimate`` says how it was obtained)
    :param estimate: the :class:`~kafka_reassign.estimate.Estimate` as JSON (formula, or a rehearsal's)
    :param preflight: the stall check (:class:`~kafka_reassign.preflight.PreflightReport` as JSON)
    :param rehearsal: the rehearsal's report (:class:`~kafka_reassign.rehearse.RehearsalReport` as
        JSON) when ``rehearse`` was set; then ``estimate`` is the rehearsal's
    """

    plan: ReassignmentPlan
    params: ReassignParams
    batches: list[Batch]
    throttle_spec: ThrottleSpec
    throttle_changes: list[ConfigChange]
    cluster_id: str | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    estimated_seconds: float = 0.0
    batch_estimates: list[float] = field(default_factory=list)
    estimate: dict[str, Any] | None = None
    preflight: dict[str, Any] | None = None
    rehearsal: dict[str, Any] | None = None

    @property
    def steps(self) -> list[StepMove]:
        return [s for b in self.batches for s in b.steps]

    def own_targets(self) -> dict[TopicPartition, list[tuple[int, ...]]]:
        """Every replica list this run may submit, per partition (to recognise our moves)."""
        out: dict[TopicPartition, list[tuple[int, ...]]] = {}
        for s in self.steps:
            out.setdefault(s.key, []).append(tuple(s.target))
        for m in self.plan.moves:
            out.setdefault(m.key, []).append(tuple(m.replicas))
        return out

    def report(self) -> str:
        """A printable dry-run report: batches, steps and the exact config changes."""
        steps = self.steps
        moving = {s.key for s in steps}
        total = sum(s.bytes_to_copy for s in steps)
        leaders = sum(1 for s in steps if s.moves_leader)
        lines = [
            f"Reassignment of {len(self.plan.moves)} partition(s): {len(moving)} to move, "
            f"{len(self.plan.moves) - len(moving)} already at target",
            f"  {len(self.batches)} batch(es), {len(steps)} step(s), {fmt_bytes(total)} to copy, "
            f"{leaders} leader movement(s)",
            f"  limits per batch: {self.params.max_partition_movements} partition movements, "
            f"{self.params.max_movements_per_broker} per broker, {self.params.max_leader_movements} leader movements",
        ]
        rate = self.throttle_spec.rate
        if rate is None:
            lines.append("  throttle: NONE (replication is not throttled)")
        else:
            lines.append(f"  throttle: {fmt_bytes(rate)}/s on broker(s) "
                         f"{','.join(map(str, sorted(self.throttle_spec.rate_brokers))) or '-'}")
        if self.throttle_spec.log_dir_brokers:
            lines.append(f"  log-dir move throttle: {fmt_bytes(self.throttle_spec.log_dir_rate or 0)}/s on "
                         f"broker(s) {','.join(map(str, sorted(self.throttle_spec.log_dir_brokers)))}")
        if self.estimate is not None:
            lines.append(f"  {Estimate.from_json(self.estimate).describe()}")
        else:
            lines.append(f"  estimated moving time: {self.estimated_seconds:.0f} s")
        if self.preflight is not None:
            lines.append(f"  pre-flight: {self.preflight.get('rates')}; "
                         f"{self.preflight.get('stall_count', 0)} stalling, {self.preflight.get('slow_count', 0)} "
                         "slow move(s)")
        for b, secs in zip(self.batches, self.batch_estimates or [0.0] * len(self.batches)):
            lines.append(f"Batch {b.index}: {len(b.steps)} step(s), {fmt_bytes(b.bytes_to_copy)}, ~{secs:.0f} s")
            for s in b.steps:
                if s.is_log_dir_only:
                    dirs = ", ".join(f"broker {br} -> {d}" for br, d in sorted(s.wanted_dirs().items()))
                    lines.append(f"  {s.name}: log dirs: {dirs}")
                    continue
                extra = []
                if s.adding:
                    extra.append("+" + ",".join(map(str, s.adding)))
                if s.removing:
                    extra.append("-" + ",".join(map(str, s.removing)))
                if s.moves_leader:
                    extra.append(f"preferred leader {s.current[0]}->{s.target[0]}")
                lines.append(f"  {s.name}: {_fmt(s.current)} -> {_fmt(s.target)}  ({' '.join(extra)}; "
                             f"step {s.step_index + 1}/{s.step_count}, {fmt_bytes(s.size_bytes)})")
        lines.append(f"Config changes ({len(self.throttle_changes)}):")
        lines += [f"  {c.describe()}" for c in self.throttle_changes] or ["  (none)"]
        if self.notes:
            lines.append("Notes:")
            lines += [f"  {n}" for n in self.notes]
        if self.warnings:
            lines.append("Warnings:")
            lines += [f"  {w}" for w in self.warnings]
        if self.rehearsal:
            lines.append(self.rehearsal.get("text", ""))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"plan": self.plan.to_json(), "params": self.params.to_json(),
                "batches": [b.to_json() for b in self.batches], "throttle_spec": self.throttle_spec.to_json(),
                "throttle_changes": [c.to_json() for c in self.throttle_changes], "cluster_id": self.cluster_id,
                "warnings": list(self.warnings), "notes": list(self.notes),
                "estimated_seconds": None if self.estimated_seconds == float("inf") else self.estimated_seconds,
                "batch_estimates": [None if x == float("inf") else x for x in self.batch_estimates],
                "estimate": self.estimate, "preflight": self.preflight, "rehearsal": self.rehearsal}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | str) -> "PreparedRun":
        if isinstance(d, str):
            d = json.loads(d)
        est = d.get("estimated_seconds")
        return cls(plan=ReassignmentPlan.from_json(d["plan"]), params=validate_params(d["params"]),
                   batches=[Batch.from_json(b) for b in d["batches"]],
                   throttle_spec=ThrottleSpec.from_json(d["throttle_spec"]),
                   throttle_changes=[ConfigChange.from_json(c) for c in d["throttle_changes"]],
                   cluster_id=d.get("cluster_id"), warnings=list(d.get("warnings", [])),
                   notes=list(d.get("notes", [])), estimated_seconds=float("inf") if est is None else est,
                   batch_estimates=[float("inf") if x is None else x for x in d.get("batch_estimates", [])],
                   estimate=d.get("estimate"), preflight=d.get("preflight"), rehearsal=d.get("rehearsal"))


def _read_throttle_configs(admin: Any, spec_or_resources: ThrottleSpec | tuple[list[int], list[str]]
                           ) -> dict[tuple[str, str], dict[str, str | None]]:
    brokers, topics = spec_or_resources.resources() if isinstance(spec_or_resources, ThrottleSpec) \
        else spec_or_resources
    out: dict[tuple[str, str], dict[str, str | None]] = {}
    if brokers:
        out.update(admin.describe_configs(broker_ids=brokers, topics=(), keys=BROKER_KEYS))
    if topics:
        out.update(admin.describe_configs(broker_ids=(), topics=topics, keys=TOPIC_KEYS))
    return out


def prepare(admin: Any, plan: ReassignmentPlan | dict[str, Any] | str,
            params: ReassignParams | Mapping[str, Any] | None = None, *, run_id: str | None = None,
            own_targets: Mapping[TopicPartition, Any] | None = None,
            state: ClusterState | None = None,
            produce_rates: Mapping[TopicPartition, float] | None = None,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic) -> PreparedRun:
    """Validate the plan against the live cluster and compute batches and throttle changes.

    Writes nothing: a dry run is ``print(prepare(...).report())``.

    :param admin: a :class:`~kafka_reassign.admin.KafkaAdmin` (or anything with its methods)
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
    :raises PreflightError: a move would stall at this throttle (unless ``allow_stalling_moves``)
    """
    params = validate_params(params)
    state = state if state is not None else admin.cluster_state()
    warnings = validate_plan(plan, state, allow_rf_change=params.allow_rf_change, own_run_id=run_id,
                             allow_internal_topics=params.allow_internal_topics, own_targets=own_targets)
    if not isinstance(plan, ReassignmentPlan):
        plan = ReassignmentPlan.from_json(plan)
    batches = build_batches(plan.moves, state, params.max_partition_movements, params.max_movements_per_broker,
                            params.max_leader_movements)
    steps = [s for b in batches for s in b.steps]
    spec = ThrottleSpec.for_moves(steps, params.throttle_bytes_per_sec, params.log_dir_throttle_bytes_per_sec)
    notes: list[str] = []
    current = _read_throttle_configs(admin, spec) if not spec.empty else {}
    changes = throttle_changes(spec, current, notes) if not spec.empty else []
    rates = _produce_rates(admin, state, steps, params, produce_rates, sleep, clock)
    state = with_produce_rates(state, rates.rates)
    check = preflight(steps, state, params.throttle_bytes_per_sec, rates,
                      log_dir_throttle=params.log_dir_throttle_bytes_per_sec, current_configs=current)
    warnings += enforce(check, params.allow_stalling_moves)  # raises PreflightError: nothing written
    if params.throttle_bytes_per_sec is None and any(s.adding for s in steps):
        warnings.append("no throttle: replication traffic is unbounded and may slow producers and consumers")
    limits = Limits(rate=params.throttle_bytes_per_sec, log_dir_rate=params.log_dir_throttle_bytes_per_sec,
                    broker_rates=check.kept_lower)
    estimate, per_batch = estimate_batches([b.steps for b in batches], state, limits)
    rehearsal = None
    if params.rehearse and any(s.adding or s.is_log_dir_only for s in steps):
        from kafka_reassign.rehearse import rehearse_live
        rehearsal = rehearse_live(admin, plan, params, rates.rates)
        estimate = rehearsal.estimate()  # a rehearsal, when made, is the estimate shown
    return PreparedRun(plan=plan, params=params, batches=batches, throttle_spec=spec, throttle_changes=changes,
                       cluster_id=state.cluster_id, warnings=warnings, notes=notes,
                       estimated_seconds=estimate.seconds, batch_estimates=per_batch,
                       estimate=estimate.to_json(), preflight=check.to_json(),
                       rehearsal=None if rehearsal is None else rehearsal.to_json())


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
        current = _read_throttle_configs(admin, (sorted(brokers), sorted(topics)))
        # Keys the spec needs beyond the record (not expected, but never lose a prior value).
        recorded = {(c.resource_type, c.name, c.key) for c in record.changes}
        extra = [c for c in throttle_changes(spec, current) if (c.resource_type, c.name, c.key) not in recorded]
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
        current = _read_throttle_configs(admin, (sorted(brokers), sorted(topics)))
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
        changes = throttle_changes(spec, virtual)
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


def execute_batch(admin: Any, batch: Batch, *, run_id: str | None = None) -> dict[str, Any]:
    """Submit a batch's steps. Idempotent and safe to re-run.

    Partitions already at the step's target are skipped; ones already moving to exactly that
    target are adopted; one moving elsewhere (someone else) or whose replicas changed since
    planning is an error and is not touched. Log-dir steps use AlterReplicaLogDirs for the
    replicas not yet in the wanted dir.

    :param admin: KafkaAdmin
    :param batch: the batch
    :param run_id: for log messages
    :raises BatchExecutionError: when any partition failed (``.result`` has the details;
        the other partitions were submitted)
    """
    result: dict[str, Any] = {"batch": batch.index, "submitted": [], "adopted": [], "skipped": [],
                              "log_dirs_submitted": [], "errors": {}}
    keys = [s.key for s in batch.steps]
    in_flight = admin.list_partition_reassignments(keys)
    metas = admin.topic_metadata(sorted({t for t, _ in keys}))
    replicas: dict[TopicPartition, tuple[int, ...]] = {}
    for t in metas:
        for p in t.partitions:
            replicas[(t.name, p.partition)] = p.replicas
    submit: dict[TopicPartition, list[int]] = {}
    for s in batch.steps:
        if s.is_log_dir_only:
            continue
        cur = replicas.get(s.key)
        inf = in_flight.get(s.key)
        if cur is None:
            result["errors"][s.name] = "UNKNOWN_TOPIC_OR_PARTITION: the partition no longer exists"
        elif inf is not None:
            if tuple(inf.target) == tuple(s.target):
                result["adopted"].append(s.name)
            else:
                result["errors"][s.name] = (f"{s.name} is already being reassigned to {_fmt(inf.target)} by "
                                            "someone else; not touched")
        elif tuple(cur) == tuple(s.target):
            result["skipped"].append(s.name)
        elif set(cur) != set(s.current):
            result["errors"][s.name] = (f"{s.name} replicas are {_fmt(cur)}, not {_fmt(s.current)} as when the "
                                        "batch was planned; prepare the run again")
        else:
            submit[s.key] = list(s.target)
    # New replicas with a wanted log dir: tell their brokers first (Kafka remembers the dir and
    # answers REPLICA_NOT_AVAILABLE until the replica exists), as kafka-reassign-partitions does.
    preferred = {(s.topic, s.partition, b): d for s in batch.steps
                 if s.key in submit and s.log_dirs for b, d in s.wanted_dirs().items() if b in s.adding}
    if preferred:
        try:
            answers = admin.alter_replica_log_dirs(preferred)
        except KafkaAdminError as exc:  # best effort: the log-dir step that follows moves them anyway
            log.warning("could not pre-set log dirs of new replicas (%s); a log-dir step follows", exc)
            answers = {}
        for k, err in answers.items():
            if err not in (None, "REPLICA_NOT_AVAILABLE"):
                log.warning("could not pre-set log dir %s for %s-%s on broker %s: %s (a log-dir step follows)",
                            preferred[k], k[0], k[1], k[2], err)
    if submit:
        log.info("run %s batch %d: AlterPartitionReassignments for %d partition(s)", run_id, batch.index,
                 len(submit))
        for key, err in admin.alter_partition_reassignments(submit).items():
            name = f"{key[0]}-{key[1]}"
            if err is None:
                result["submitted"].append(name)
            else:
                result["errors"][name] = err
    dir_steps = [s for s in batch.steps if s.is_log_dir_only]
    if dir_steps:
        brokers = sorted({b for s in dir_steps for b in s.wanted_dirs()})
        rows = admin.describe_log_dirs(brokers, [s.key for s in dir_steps])
        where = {(r.topic, r.partition, r.broker): r.path for r in rows if not r.is_future}
        future = {(r.topic, r.partition, r.broker): r.path for r in rows if r.is_future}
        moves: dict[tuple[str, int, int], str] = {}
        for s in dir_steps:
            pending = False
            for b, d in sorted(s.wanted_dirs().items()):
                k = (s.topic, s.partition, b)
                if future.get(k) == d:
                    pending = True  # already moving there: adopt
                elif where.get(k) != d:
                    moves[k] = d
            if not any(k[:2] == s.key for k in moves):
                (result["adopted"] if pending else result["skipped"]).append(s.name)
        if moves:
            for (t, p, b), err in admin.alter_replica_log_dirs(moves).items():
                if err is None:
                    result["log_dirs_submitted"].append(f"{t}-{p}@{b}")
                else:
                    result["errors"][f"{t}-{p}@{b}"] = err
    if result["errors"]:
        errs = "; ".join(f"{k}: {v}" for k, v in sorted(result["errors"].items()))
        raise BatchExecutionError(f"batch {batch.index}: {len(result['errors'])} partition(s) failed: {errs}",
                                  result)
    return result


def poll_batch(admin: Any, batch: Batch, previous: BatchProgress | None = None,
               now: float | None = None) -> BatchProgress:
    """Read-only progress of a batch (ListPartitionReassignments, metadata, DescribeLogDirs).

    :param previous: the previous poll, for rate and ETA
    :param now: poll time (default monotonic clock)
    """
    topics = sorted({s.topic for s in batch.steps})
    state = admin.cluster_state(include_log_dirs=False, topics=topics)
    brokers = sorted({b for s in batch.steps for b in (*s.current, *s.target)
                      if b in state.brokers and state.brokers[b].alive})
    rows = admin.describe_log_dirs(brokers, [s.key for s in batch.steps]) if brokers else []
    return BatchProgress.build(batch, state.in_flight, state, rows, previous=previous, now=now)


def complete_batch(admin: Any, batch: Batch) -> dict[TopicPartition, str | None]:
    """After a batch is done: elect the preferred leader where it is in sync but not leading.

    KIP-435 brings the new preferred leader in first; this moves leadership to it now
    rather than waiting for the brokers' periodic auto leader rebalance.
    """
    state = admin.cluster_state(include_log_dirs=False, topics=sorted({s.topic for s in batch.steps}))
    want = []
    for s in batch.steps:
        p = state.partition(s.topic, s.partition)
        if p is not None and p.replicas and p.leader != p.replicas[0] and p.replicas[0] in p.isr:
            want.append(s.key)
    if not want:
        return {}
    res = admin.elect_preferred_leaders(want)
    for k, err in res.items():
        if err:
            log.warning("preferred leader election for %s-%s: %s", k[0], k[1], err)
    return res


def cancel_in_flight(admin: Any, what: Batch | PreparedRun | ReassignmentPlan,
                     state: ClusterState | None = None) -> dict[str, Any]:
    """Cancel (revert) in-flight reassignments that are ours; leave everyone else's alone.

    Kafka reverts a cancelled partition to ``replicas - adding``, which loses the original
    order (so the preferred leader can change). Where we know the order the step started
    from, we put it back with a reorder-only reassignment (no data moves).

    :param what: a batch (its step targets), a prepared run (all its step targets) or a plan
        (final targets, and the first step from where each partition was)
    :param state: for min ISR when ``what`` is a plan (default: read)
    :returns: {"cancelled": [...], "left": [...], "reordered": [...], "errors": {...}}
    """
    own: dict[TopicPartition, list[tuple[int, ...]]] = {}
    origin: dict[tuple[TopicPartition, tuple[int, ...]], tuple[int, ...]] = {}
    plan_targets: dict[TopicPartition, tuple[int, ...]] = {}
    steps = what.steps if isinstance(what, Batch) else what.steps if isinstance(what, PreparedRun) else []
    for s in steps:
        own.setdefault(s.key, []).append(tuple(s.target))
        origin[(s.key, tuple(s.target))] = tuple(s.current)
    if isinstance(what, PreparedRun):
        for m in what.plan.moves:
            own.setdefault(m.key, []).append(tuple(m.replicas))
    elif isinstance(what, ReassignmentPlan):
        plan_targets = {m.key: tuple(m.replicas) for m in what.moves}
        own = {k: [v] for k, v in plan_targets.items()}
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
            restore_order[key] = origin.get((key, tuple(inf.target)), tuple(inf.original))
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
        for t in admin.topic_metadata(sorted({k[0] for k in restore_order})):
            for p in t.partitions:
                key = (t.name, p.partition)
                now = p.replicas
                want = restore_order.get(key)
                if want is not None and now != want and set(now) == set(want):
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


def wait_for_batch(admin: Any, batch: Batch, params: ReassignParams, *, throttle_rate: int | None = None,
                   rates: ClusterState | None = None,
                   on_progress: Callable[[BatchProgress], None] | None = None,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> BatchProgress:
    """Poll until the batch is done; raise on stall or timeout (the sensor's logic, blocking).

    :param rates: a state with partitions' bytes_in_per_sec (e.g. from a snapshot) for the stall
        diagnosis; without it the produce rate is measured from the leaders' log growth
    :raises StallError: lag did not fall over ``params.stall_window_seconds``
    :raises BatchTimeoutError: not done within ``params.batch_timeout_minutes``
    """
    start = clock()
    deadline = start + params.batch_timeout_minutes * 60
    stall = StallDetector(params.stall_window_seconds)
    previous: BatchProgress | None = None
    while True:
        now = clock()
        prog = poll_batch(admin, batch, previous=previous, now=now)
        if on_progress is not None:
            on_progress(prog)
        if prog.done:
            return prog
        stall.observe(now, prog.bytes_left)
        msg = stall.check(prog, rates, throttle_rate)
        if msg:
            raise StallError(f"batch {batch.index}: {msg}")
        if now >= deadline:
            raise BatchTimeoutError(f"batch {batch.index} not finished after {params.batch_timeout_minutes:g} "
                                    f"minute(s): {prog.summary()}")
        previous = prog
        sleep(min(params.poll_interval_seconds, max(0.0, deadline - now) + 0.01))


@dataclass
class RunResult:
    """Outcome of :func:`run_reassignment`."""

    run_id: str
    prepared: PreparedRun
    dry_run: bool = False
    batches_done: int = 0
    restore: RestoreResult | None = None
    cancelled: dict[str, Any] | None = None
    error: str | None = None
    progress: list[dict[str, Any]] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)
    throttle_reapplied: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "dry_run": self.dry_run, "batches": len(self.prepared.batches),
                "batches_done": self.batches_done, "error": self.error, "cancelled": self.cancelled,
                "restore": self.restore.to_json() if self.restore else None}


def run_reassignment(admin: Any, plan: ReassignmentPlan | dict[str, Any] | str,
                     params: ReassignParams | Mapping[str, Any] | None, store: RecordStore, *,
                     run_id: str | None = None, on_progress: Callable[[BatchProgress], None] | None = None,
                     on_event: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.monotonic,
                     produce_rates: Mapping[TopicPartition, float] | None = None) -> RunResult:
    """Run a whole reassignment (what ``kafka-reassign execute`` does).

    The throttle is restored in a ``finally`` whatever happens; on failure with
    ``cancel_on_failure`` our in-flight moves are cancelled first.

    :raises: the first error (validation, Kafka, stall, timeout) after cleaning up
    """
    run_id = run_id or new_run_id()
    say = on_event or (lambda m: log.info("%s", m))
    prepared = prepare(admin, plan, params, run_id=run_id, produce_rates=produce_rates, sleep=sleep, clock=clock,
                       own_targets=submitted_targets(store, None, run_id))
    result = RunResult(run_id=run_id, prepared=prepared, dry_run=prepared.params.dry_run)
    say(prepared.report())
    if prepared.params.dry_run:
        say("dry run: nothing written")
        return result
    if not prepared.batches:
        say(f"run {run_id}: nothing to move: every partition is already at its target; nothing written")
        return result
    p = prepared.params
    failure: BaseException | None = None
    guard = ThrottleGuard(admin, store, run_id)

    def watch(prog: BatchProgress) -> None:
        # Every poll: put the throttle back if someone removed or raised it (raises if it cannot).
        for w in guard.check().warnings:
            say(f"warning: {w}")
        if on_progress is not None:
            on_progress(prog)

    try:
        apply_throttle(admin, prepared, store, run_id)
        say(f"run {run_id}: throttle set ({len(prepared.throttle_changes)} config change(s))")
        for batch in prepared.batches:
            note_submitted(store, run_id, prepared.cluster_id,
                           {s.key: s.target for s in batch.steps if not s.is_log_dir_only})
            res = execute_batch(admin, batch, run_id=run_id)
            result.executions.append(res)
            say(f"batch {batch.index}/{len(prepared.batches) - 1}: submitted {len(res['submitted'])}, "
                f"adopted {len(res['adopted'])}, skipped {len(res['skipped'])}, "
                f"log dirs {len(res['log_dirs_submitted'])}")
            prog = wait_for_batch(admin, batch, p, throttle_rate=p.throttle_bytes_per_sec,
                                  on_progress=watch, sleep=sleep, clock=clock)
            result.progress.append({"batch": batch.index, "bytes_total": prog.bytes_total})
            complete_batch(admin, batch)
            result.batches_done += 1
    except BaseException as exc:
        failure = exc
        result.error = str(exc)
        if p.cancel_on_failure:
            try:
                result.cancelled = cancel_in_flight(admin, prepared)
                say(f"run {run_id}: cancelled in-flight moves {result.cancelled['cancelled']}")
            except Exception as cexc:  # noqa: BLE001 - keep going to the throttle restore
                say(f"run {run_id}: cancelling in-flight moves failed: {cexc}")
        raise
    finally:
        try:
            result.restore = restore_throttle(admin, store, run_id,
                                              keep_while_moving=failure is not None and not p.cancel_on_failure)
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
    return result
