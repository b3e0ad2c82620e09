"""Rehearsal: run a plan on a simulated copy of the cluster before touching the real one.

The cluster's snapshot (brokers, racks, log dirs, partition sizes, produce rates, throttle
configs already set) seeds a :class:`kafka_sim.SimulatedCluster` in this process, and the
same executor loop the real run uses drives it, with the same parameters and limits, over
the Kafka protocol. Time is virtual: the simulated clock only moves when the loop waits
for its next poll, and then jumps by exactly that poll interval, so the rehearsal runs as
fast as the CPU allows and its polls see the cluster at the same simulated moments a real
run's polls would.

Everything is measured from the cluster's side (the simulator's own state, not the
executor's view): the moving time from the first reassignment submitted to the last one
completed, bytes copied over time, how long each partition was moving, in-sync replica
sets shrinking or falling below min.insync.replicas, under-replicated partitions, and the
moves in flight per broker. Nothing is written to the real cluster: a live rehearsal only
reads a snapshot from it.
"""
from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from kafka_reassign.cluster.port import ClusterReader, KafkaAdminPort
from kafka_reassign.errors import ReassignError
from kafka_reassign.planning.estimate import SOURCE_REHEARSAL, Estimate
from kafka_reassign.throttle.specs import BROKER_KEYS, TOPIC_KEYS
from kafka_reassign.units import fmt_bytes, format_duration

log = logging.getLogger(__name__)

#: Snapshot field (per broker) carrying the dynamic throttle configs set on the cluster.
THROTTLE_CONFIGS = "throttle_configs"
#: Points kept in the report's timeline.
TIMELINE_POINTS = 60
#: Plan partitions (not moving) whose ISR is checked per observation, in rotation.
ISR_SLICE = 2000
#: Partitions listed as the slowest.
SLOWEST = 10
#: Kafka's IncrementalAlterConfigs resource type of a broker and its SET operation.
_BROKER_RESOURCE, _SET = 4, 0


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
        """Predicted moving time / throttle bound."""
        if self.predicted_seconds is None or not self.bound_seconds:
            return None
        return self.predicted_seconds / self.bound_seconds

    def estimate(self) -> Estimate:
        """The rehearsal's prediction as an :class:`Estimate` (source ``rehearsal``)."""
        formula = Estimate.from_json(self.formula) if self.formula else None
        return Estimate(seconds=math.inf if self.predicted_seconds is None else self.predicted_seconds,
                        bound_seconds=self.bound_seconds, source=SOURCE_REHEARSAL,
                        busiest_broker=formula.busiest_broker if formula else None, bytes_total=self.bytes_total,
                        stalled=[] if self.predicted_seconds is not None else [self.outcome],
                        detail={"cpu_seconds": round(self.cpu_seconds, 2), "outcome": self.outcome})

    def format(self) -> str:
        """The printable report (CLI, task log)."""
        ratio = f"{self.ratio:.2f}x" if self.ratio is not None else "-"
        lines = [f"Rehearsal of {self.partitions} partition(s), {self.steps} step(s), {fmt_bytes(self.bytes_total)} "
                 f"to copy, throttle {fmt_bytes(self.throttle) + '/s' if self.throttle else 'none'}",
                 f"  predicted moving time: {format_duration(self.predicted_seconds)} ({ratio} the throttle bound "
                 f"{format_duration(self.bound_seconds)}); outcome: {self.outcome}"]
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

    def to_json(self) -> dict[str, Any]:
        return {"predicted_seconds": self.predicted_seconds, "bound_seconds": self.bound_seconds,
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


class ClusterWatch:
    """Observes a simulated cluster between polls: what is moving, copied, in sync.

    :param model: the simulator's ClusterModel
    :param plan_keys: the plan's partitions (their ISR is watched)
    :param dir_keys: the plan's partitions with log dirs named (KIP-113 moves are watched too)
    """

    def __init__(self, model: Any, plan_keys: set[tuple[str, int]],
                 dir_keys: set[tuple[str, int]] | None = None) -> None:
        self.model = model
        self.plan_keys = plan_keys
        self.dir_keys = sorted(dir_keys or ())
        self.first_submit: float | None = None
        self.last_done: float | None = None
        self.moving_since: dict[tuple[str, int], float] = {}
        self.moving_total: dict[tuple[str, int], float] = {}
        # partition -> (broker, "broker" | "dir") -> bytes its new copy holds; and their sum
        self.copied: dict[tuple[str, int], dict[tuple[int, str], float]] = {}
        self.copied_total = 0.0
        self.timeline: list[list[float]] = []
        self.peak: dict[int, dict[str, int]] = {}
        self.urp_peak = 0
        self.risks: list[dict[str, Any]] = []
        self._risk_seen: set[tuple[str, int, str]] = set()
        self._isr0: dict[tuple[str, int], set[int]] = {}
        self._min_isr: dict[str, int] = {}
        self._prev_t: float | None = None
        self._order = sorted(plan_keys)
        self._cursor = 0
        with model.lock:
            for key in plan_keys:
                p = model.partition(*key)
                if p is not None:
                    self._isr0[key] = set(p.isr)

    def observe(self, scan: bool = False) -> None:
        """Record the cluster's state now (called at every sub-step of a virtual wait).

        :param scan: also check the ISR of a slice of the plan's partitions that are not moving
        """
        m = self.model
        with m.lock:
            now = m.sim_time()
            keys: set[tuple[str, int]] = set()
            self._reassignments(now, keys)
            if self.dir_keys:
                self._dir_moves(now, keys)
            # A move that disappeared finished since the previous look: count the middle.
            done_at = now if self._prev_t is None else (self._prev_t + now) / 2.0
            for key in [k for k in self.moving_since if k not in keys]:
                self.moving_total[key] = self.moving_total.get(key, 0.0) + done_at - self.moving_since.pop(key)
                self.last_done = done_at
                p = m.partition(*key)
                if p is not None:  # finished: its new copies hold the whole log
                    for sub in list(self.copied.get(key, ())):
                        self._copy(key, sub, float(p.log_bytes()))
            self._check_isr(now, keys, scan)
            if self.first_submit is not None:
                self.timeline.append([now - self.first_submit, self.copied_total])
            self._prev_t = now

    def _copy(self, key: tuple[str, int], sub: tuple[int, str], nbytes: float) -> None:
        subs = self.copied.setdefault(key, {})
        self.copied_total += nbytes - subs.get(sub, 0.0)
        subs[sub] = nbytes

    def _moving(self, key: tuple[str, int], now: float, keys: set[tuple[str, int]]) -> None:
        keys.add(key)
        if self.first_submit is None:
            self.first_submit = now
        self.moving_since.setdefault(key, now)

    def _reassignments(self, now: float, keys: set[tuple[str, int]]) -> None:
        """Inter-broker moves in flight: bytes copied, moves per broker in and out."""
        m = self.model
        inn: dict[int, int] = {}
        out: dict[int, int] = {}
        for topic, index, _replicas, adding, _removing in m.list_reassignments(None):
            p = m.partition(topic, index)
            if p is None:
                continue
            self._moving((topic, index), now, keys)
            for b in adding:
                r = p.replica(b)
                if r is not None:
                    self._copy((topic, index), (b, "broker"), float(r.exact_bytes()))
                inn[b] = inn.get(b, 0) + 1
            if adding and p.leader >= 0:
                out[p.leader] = out.get(p.leader, 0) + 1
        for side, counts in (("in", inn), ("out", out)):
            for b, n in counts.items():
                peak = self.peak.setdefault(b, {"in": 0, "out": 0})
                peak[side] = max(peak[side], n)

    def _dir_moves(self, now: float, keys: set[tuple[str, int]]) -> None:
        """KIP-113 moves between log dirs of the plan's partitions (future replicas)."""
        m = self.model
        for key in self.dir_keys:
            p = m.partition(*key)
            for b in (p.replicas if p is not None else ()):
                r = p.replica(b)
                if r is not None and r.future_log_dir is not None:
                    self._moving(key, now, keys)
                    self._copy(key, (b, "dir"), float(r.future_bytes))

    def _check_isr(self, now: float, moving: set[tuple[str, int]], scan: bool) -> None:
        """ISR of the moving partitions, and (``scan``) of a rotating slice of the plan's others."""
        m = self.model
        n = len(self._order) if scan else 0
        start = self._cursor
        self._cursor = (start + ISR_SLICE) % n if n else 0
        others = [self._order[(start + i) % n] for i in range(min(ISR_SLICE, n))]
        urp = 0
        for key in list(moving) + [k for k in others if k not in moving]:
            p = m.partition(*key)
            if p is None:
                continue
            isr = set(p.isr)
            if len(isr) < len(p.replicas):
                urp += 1
            lost = (self._isr0.get(key, set()) & set(p.replicas)) - isr - set(p.removing)
            if lost:
                self._risk(key, f"replica(s) {sorted(lost)} left the ISR", now)
            min_isr = self._min_isr.get(key[0])
            if min_isr is None:
                min_isr = self._min_isr[key[0]] = m.min_insync_replicas(key[0])
            if len(isr) < min_isr:
                self._risk(key, f"ISR {sorted(isr)} below min.insync.replicas={min_isr} (acks=all writes fail)", now)
            if key not in moving:
                self._isr0[key] = isr
        self.urp_peak = max(self.urp_peak, urp)

    def _risk(self, key: tuple[str, int], what: str, now: float) -> None:
        tag = (key[0], key[1], what.split(" ")[0])
        if tag in self._risk_seen:
            return
        self._risk_seen.add(tag)
        self.risks.append({"partition": f"{key[0]}-{key[1]}", "what": what,
                           "at": round(now - (self.first_submit or now), 3)})

    def moving_seconds(self) -> float | None:
        if self.first_submit is None:
            return 0.0
        if self.moving_since or self.last_done is None:
            return None
        return self.last_done - self.first_submit


def _downsample(points: list[list[float]], n: int = TIMELINE_POINTS) -> list[list[float]]:
    if len(points) <= n:
        return [[round(t, 3), round(b)] for t, b in points]
    step = (len(points) - 1) / (n - 1)
    return [[round(points[round(i * step)][0], 3), round(points[round(i * step)][1])] for i in range(n)]


def virtual_sleep(model: Any, watch: ClusterWatch, resolution: float) -> Callable[[float], None]:
    """A ``sleep`` that moves the simulated clock instead of waiting, observing every ``resolution``."""
    def sleep(seconds: float) -> None:
        watch.observe(scan=True)
        left = max(0.0, float(seconds))
        while left > 1e-9:
            dt = min(resolution, left)
            model.advance_by(dt)
            left -= dt
            watch.observe()
    return sleep


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


def rehearse(snapshot: Mapping[str, Any], plan: Any, params: Mapping[str, Any] | Any = None, *,
             resolution: float | None = None, network_bytes_per_sec: float | None = None,
             on_event: Callable[[str], None] | None = None) -> RehearsalReport:
    """Run ``plan`` on a simulator seeded from ``snapshot`` and report what happened.

    :param snapshot: the cluster snapshot (``read_rehearsal_snapshot`` for a live cluster)
    :param plan: the reassignment plan (object, JSON or parsed)
    :param params: the run parameters the real run will use (``dry_run`` is ignored)
    :param resolution: simulated seconds between observations (default: half the poll interval)
    :param network_bytes_per_sec: broker network capacity where the snapshot does not say
    :param on_event: receives the executor's messages
    :raises PreflightError, PlanValidationError, ParamError: as the real run would refuse
    """
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.throttle.record import MemoryRecordStore
    from kafka_reassign.cluster.state import rates_from_snapshot
    from kafka_reassign.planning.validate import validate_params
    from kafka_sim import SimulatedCluster

    p = validate_params({**(params.to_json() if hasattr(params, "to_json") else dict(params or {})),
                         "dry_run": False, "rehearse": False})
    snap = copy.deepcopy(dict(snapshot))
    if network_bytes_per_sec:
        for b in snap.get("brokers", []):
            b.setdefault("network_bytes_per_sec", network_bytes_per_sec)
    cpu0, wall0 = time.process_time(), time.monotonic()
    cluster = SimulatedCluster(snap, time_scale=0.0)
    model = cluster.model
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
        with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, client_id="kafka-reassign-rehearsal") as admin:
            rates = rates_from_snapshot(snap)
            # Read-only, and refuses (PreflightError...) exactly as the real run would.
            prepared = prepare(admin, plan, p, run_id="rehearsal", produce_rates=rates)
            try:
                _run(admin, plan, p, MemoryRecordStore(), sleep, model.now, rates, say)
            except ReassignError as exc:
                outcome = f"failed: {exc}"
        watch.observe()
    finally:
        cluster.stop()
    return _report(watch, prepared, p, outcome, model.sim_time(), time.process_time() - cpu0,
                   time.monotonic() - wall0)


def _plan_entries(plan: Any) -> list[dict[str, Any]]:
    from kafka_reassign.planning.plan import ReassignmentPlan
    obj = plan if isinstance(plan, ReassignmentPlan) else ReassignmentPlan.from_json(plan)
    return [{"topic": m.topic, "partition": m.partition,
             "log_dirs": bool(m.log_dirs and any(d != "any" for d in m.log_dirs))} for m in obj.moves]


def _run(admin: KafkaAdminPort, plan: Any, params: Any, store: Any, sleep: Callable[[float], None], clock: Callable[[], float],
         rates: Mapping[tuple[str, int], float], say: Callable[[str], None]) -> Any:
    """The executor loop of a real run, on the simulator's clock."""
    from kafka_reassign.run.reassign import run_reassignment
    # No throttle guard: it protects a run from other people's config changes, and nobody else
    # can reach the rehearsal's private cluster (its reads would only cost time).
    return run_reassignment(admin, plan, params, store, run_id="rehearsal", on_event=say, sleep=sleep, clock=clock,
                            produce_rates=rates, guard_every=0)


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
        timeline=_downsample(watch.timeline), urp_peak=watch.urp_peak, isr_risks=watch.risks,
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
