"""Rehearsal: run a plan on a simulated copy of the cluster before touching the real one.

The cluster's snapshot (brokers, racks, log dirs, partition sizes, produce rates, throttle
configs already set) seeds a :class:`kafka_sim.SimulatedCluster` in this process, and the
same executor loop the real run uses drives it, with the same parameters and limits, through
KafkaAdmin: its frequent requests answered in this process by the simulated model
(:mod:`~kafka_reassign.rehearsal.direct`), the others over the Kafka protocol. Time is
virtual: the simulated clock only moves when the loop waits for its next poll, and then jumps
by exactly that poll interval, so the rehearsal runs as fast as the CPU allows and its polls
see the cluster at the same simulated moments a real run's polls would.

Everything is measured from the cluster's side (the simulator's own state, not the
executor's view): the moving time from the first reassignment submitted to the last one
completed, bytes copied over time, how long each partition was moving, in-sync replica
sets shrinking or falling below min.insync.replicas, under-replicated partitions, and the
moves in flight per broker. Nothing is written to the real cluster: a live rehearsal only
reads a snapshot from it.
"""
from __future__ import annotations

import contextlib
import copy
import gc
import logging
import time
from typing import Any, Callable, Iterator, Mapping

from kafka_reassign.cluster.port import ClusterReader, KafkaAdminPort
from kafka_reassign.errors import ReassignError
from kafka_reassign.rehearsal.report import RehearsalReport
from kafka_reassign.rehearsal.watch import ClusterWatch, downsample_timeline, virtual_sleep
from kafka_reassign.throttle.specs import BROKER_KEYS, TOPIC_KEYS

log = logging.getLogger(__name__)

#: Snapshot field (per broker) carrying the dynamic throttle configs set on the cluster.
THROTTLE_CONFIGS = "throttle_configs"
#: Partitions listed as the slowest.
SLOWEST = 10
#: Virtual seconds the other copies keep their rates after one catches up (kafka_sim's
#: ``replan_quantum``): a full re-plan after every catch-up was most of a large rehearsal's CPU,
#: and one second is a quota sample's length. 0 re-plans at every event (the simulator's default).
REPLAN_QUANTUM_S = 1.0
#: The rehearsal's client id (the simulated brokers' request log names it).
CLIENT_ID = "kafka-reassign-rehearsal"
#: Kafka's IncrementalAlterConfigs resource type of a broker and its SET operation.
_BROKER_RESOURCE, _SET = 4, 0


def apply_snapshot_throttles(model: Any, snapshot: Mapping[str, Any]) -> int:
    """Set the dynamic broker throttle configs a snapshot carries (``throttle_configs``) on a model.

    :returns: how many configs were set
    """
    n = 0
    for b in snapshot.get("brokers", []):
        ops = [(k, _SET, str(v)) for k, v in (b.get(THROTTLE_CONFIGS) or {}).items() if v is not None]
        if ops:
            code, msg = model.incremental_alter_configs(_BROKER_RESOURCE, str(b["id"]), ops, False)
            if code:
                raise ValueError(f"snapshot broker {b['id']}: cannot set {THROTTLE_CONFIGS}: {msg}")
            n += len(ops)
    return n


@contextlib.contextmanager
def sparse_collections(young: int = 100_000) -> Iterator[None]:
    """Let Python's cycle collector run rarely while a rehearsal builds and runs its model.

    A large rehearsal holds millions of long-lived objects (partitions, replicas, steps) and
    allocates quickly; at the default threshold (a young collection every 700 allocations,
    an older one every ten of those) the collector kept re-scanning them: a quarter of a
    20,000-move rehearsal's CPU. Few of its objects form cycles, so collecting every
    ``young`` allocations frees the same garbage a little later. The thresholds in force
    before are restored on the way out.
    """
    before = gc.get_threshold()
    gc.set_threshold(young, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def rehearse(snapshot: Mapping[str, Any], plan: Any, params: Mapping[str, Any] | Any = None, *,
             resolution: float | None = None, network_bytes_per_sec: float | None = None,
             on_event: Callable[[str], None] | None = None,
             replan_quantum: float = REPLAN_QUANTUM_S, direct: bool = True) -> RehearsalReport:
    """Run ``plan`` on a simulator seeded from ``snapshot`` and report what happened.

    :param snapshot: the cluster snapshot (``read_rehearsal_snapshot`` for a live cluster)
    :param plan: the reassignment plan (object, JSON or parsed)
    :param params: the run parameters the real run will use (``dry_run`` is ignored)
    :param resolution: simulated seconds between observations (default: half the poll interval)
    :param network_bytes_per_sec: broker network capacity where the snapshot does not say
    :param on_event: receives the executor's messages
    :param replan_quantum: see :data:`REPLAN_QUANTUM_S`
    :param direct: answer the frequent requests in this process (:mod:`~kafka_reassign.rehearsal.direct`);
        False sends every request over the wire to the simulated brokers
    :raises PreflightError, PlanValidationError, ParamError: as the real run would refuse
    """
    from kafka_reassign.planning.validate import validate_params

    # No maintenance windows: the rehearsal predicts the moving time, not the hours spent waiting
    # for a window (its clock starts in 1970, not when the real run will).
    p = validate_params({**(params.to_json() if hasattr(params, "to_json") else dict(params or {})),
                         "dry_run": False, "rehearse": False, "maintenance_windows": []})
    snap = copy.deepcopy(dict(snapshot))
    if network_bytes_per_sec:
        for b in snap.get("brokers", []):
            b.setdefault("network_bytes_per_sec", network_bytes_per_sec)
    with sparse_collections():
        return _rehearse(snap, plan, p, resolution, on_event, replan_quantum, direct)


def _rehearse(snap: dict[str, Any], plan: Any, p: Any, resolution: float | None, on_event: Callable[[str], None] | None,
              replan_quantum: float, direct: bool) -> RehearsalReport:
    """:func:`rehearse` once its parameters are checked and its snapshot copied."""
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.throttle.record import MemoryRecordStore
    from kafka_reassign.cluster.state import rates_from_snapshot
    from kafka_sim import SimulatedCluster

    cpu0, wall0 = time.process_time(), time.monotonic()
    cluster = SimulatedCluster(snap, time_scale=0.0)
    model = cluster.model
    model.replan_quantum = replan_quantum
    apply_snapshot_throttles(model, snap)
    entries = _plan_entries(plan)
    plan_keys = {(e["topic"], e["partition"]) for e in entries}
    dir_keys = {(e["topic"], e["partition"]) for e in entries if e["log_dirs"]}
    watch = ClusterWatch(model, plan_keys, dir_keys)
    sleep = virtual_sleep(model, watch, resolution or max(p.poll_interval_seconds / 2.0, 0.01))
    events: list[str] = []
    say = on_event or events.append
    outcome, prepared = "done", None
    cluster.start()
    try:
        with _connect(cluster, direct) as admin:
            rates = rates_from_snapshot(snap)
            # Read-only, and refuses (PreflightError...) exactly as the real run would.
            prepared = prepare(admin, plan, p, run_id="rehearsal", produce_rates=rates)
            try:
                _run(admin, prepared, p, MemoryRecordStore(), sleep, model.now, rates, say)
            except ReassignError as exc:
                outcome = f"failed: {exc}"
        watch.observe()
    finally:
        watch.close()
        cluster.stop()
    return _report(watch, prepared, p, outcome, model.sim_time(), time.process_time() - cpu0,
                   time.monotonic() - wall0)


def _connect(cluster: Any, direct: bool) -> Any:
    """The rehearsal's admin of its simulated cluster (see ``rehearse``'s ``direct``)."""
    if direct:
        from kafka_reassign.rehearsal.direct import DirectAdmin
        return DirectAdmin(cluster, client_id=CLIENT_ID)
    from kafka_reassign.cluster.admin import KafkaAdmin
    return KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, client_id=CLIENT_ID)


def _plan_entries(plan: Any) -> list[dict[str, Any]]:
    from kafka_reassign.planning.plan import ReassignmentPlan
    obj = plan if isinstance(plan, ReassignmentPlan) else ReassignmentPlan.from_json(plan)
    return [{"topic": m.topic, "partition": m.partition,
             "log_dirs": bool(m.log_dirs and any(d != "any" for d in m.log_dirs))} for m in obj.moves]


def _run(admin: KafkaAdminPort, prepared: Any, params: Any, store: Any, sleep: Callable[[float], None],
         clock: Callable[[], float], rates: Mapping[tuple[str, int], float], say: Callable[[str], None]) -> Any:
    """The executor loop of a real run, on the simulator's clock, from the run ``prepared`` just now."""
    from kafka_reassign.run.reassign import run_reassignment
    # No throttle guard: it protects a run from other people's config changes, and nobody else
    # can reach the rehearsal's private cluster (its reads would only cost time).
    return run_reassignment(admin, prepared.plan, params, store, run_id="rehearsal", on_event=say, sleep=sleep,
                            clock=clock, produce_rates=rates, guard_every=0, prepared=prepared)


def _report(watch: ClusterWatch, prepared: Any, params: Any, outcome: str, sim_seconds: float, cpu: float,
            wall: float) -> RehearsalReport:
    formula = dict(prepared.estimate or {}) if prepared is not None else {}
    steps = prepared.steps if prepared is not None else []
    slowest = sorted(watch.moving_total.items(), key=lambda kv: -kv[1])[:SLOWEST]
    sizes = {s.key: s.size_bytes for s in steps}
    predicted = watch.moving_seconds() if outcome == "done" else None
    return RehearsalReport(
        predicted_seconds=None if predicted is None else round(predicted, 3),
        bound_seconds=float(formula.get("bound_seconds") or 0.0), formula=formula,
        timeline=downsample_timeline(watch.timeline), urp_peak=watch.urp_peak, isr_risks=watch.risks,
        slowest=[{"partition": f"{k[0]}-{k[1]}", "seconds": round(v, 3), "bytes": sizes.get(k, 0)} for k, v in slowest],
        peak_in_flight=watch.peak, outcome=outcome,
        partitions=len(prepared.plan.moves) if prepared is not None else len(watch.plan_keys), steps=len(steps),
        throttle=params.throttle_bytes_per_sec, bytes_total=sum(s.bytes_to_copy for s in steps),
        sim_seconds=round(sim_seconds, 3), wall_seconds=round(wall, 3), cpu_seconds=round(cpu, 3),
        warnings=list(prepared.warnings) if prepared is not None else [])


def rehearse_live(admin: ClusterReader, plan: Any, params: Any, rates: Mapping[tuple[str, int], float]) -> RehearsalReport:
    """Rehearse on a snapshot read now from a live cluster (what ``prepare`` does with ``rehearse``).

    :param admin: KafkaAdmin of the live cluster (only read)
    :param plan: the plan
    :param params: validated run parameters
    :param rates: the moving partitions' produce rates prepare measured (bytes/s)
    """
    snap = read_rehearsal_snapshot(admin, sample_seconds=0.0)
    for t in snap["topics"]:
        for p in t["partitions"]:
            rate = rates.get((t["name"], int(p["partition"])))
            if rate is not None:
                p["bytes_in_per_sec"] = rate
    opts = {**params.to_json(), "rehearse": False, "produce_sample_seconds": 0}
    return rehearse(snap, plan, opts)


def read_rehearsal_snapshot(admin: ClusterReader, sample_seconds: float = 5.0) -> dict[str, Any]:
    """A snapshot of a live cluster with what a rehearsal needs; reads only.

    Placement, sizes and produce rates (leader log growth over ``sample_seconds``) from
    :func:`~kafka_reassign.cluster.snapshot.read_cluster_snapshot`, plus the dynamic throttle configs
    set on brokers (``throttle_configs``) and topics (throttled-replica lists in ``configs``).

    :param admin: KafkaAdmin of the live cluster
    :param sample_seconds: produce-rate sampling window
    """
    from kafka_reassign.cluster.snapshot import read_cluster_snapshot
    snap = read_cluster_snapshot(admin, sample_seconds=sample_seconds)
    brokers = [int(b["id"]) for b in snap["brokers"] if b.get("alive", True)]
    configs = admin.describe_configs(broker_ids=brokers, topics=(), keys=BROKER_KEYS) if brokers else {}
    for b in snap["brokers"]:
        set_ = {k: v for k, v in (configs.get(("broker", str(b["id"]))) or {}).items() if v is not None}
        if set_:
            b[THROTTLE_CONFIGS] = set_
    topics = [t["name"] for t in snap["topics"]]
    tconf = admin.describe_configs(broker_ids=(), topics=topics, keys=TOPIC_KEYS) if topics else {}
    for t in snap["topics"]:
        for k, v in (tconf.get(("topic", t["name"])) or {}).items():
            if v is not None:
                t.setdefault("configs", {})[k] = v
    return snap
