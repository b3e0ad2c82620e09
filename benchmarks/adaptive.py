"""Benchmark (simulator figure): health-adaptive concurrency against fixed caps, as min ISR breaches.

Broker 2 leads every partition; the plan moves the followers of ``cold`` (not written) and
``fast`` (rf 2, min ISR 1, 1 MB/s a partition) to brokers 4-6, so broker 2 sources every copy.
``slow`` (rf 3, min ISR 2, 0.5 MB/s) stays. Mid-run broker 2's link degrades in two steps, each
to a speed that carries all its in-sync traffic (4 MB/s) but not next to eight copies: the
simulator shares a saturated link per partition (kafka_sim.replication_sharing, modelled from
Kafka's fetch protocol, not measured), so copies leave the in-sync followers less than their
write rate. At 9.5 MB/s only the ``fast`` followers fall behind: their partitions are at min
ISR, a signal without a breach. At 5.5 MB/s, with eight copies in flight, the ``slow`` ones do
too, both followers of a partition: it is under min ISR, and since Kafka's high watermark
stands still there, the followers are back at their next fetch and out again at the next
isr-expiration run, every 15 s (as on real Kafka: benchmarks/real_kafka_adaptive.py runs its
own scenario on both). With adaptive caps the first step's signal has shrunk broker 2's cap by
then; they grow back once the link is restored.

The ISR is sampled from the simulator's model every half second of virtual time, not from the
executor. Prints, for both runs: partition-seconds under min ISR, the least ISR size seen per
topic, the run's virtual duration, broker 2's cap (least..greatest) and the changes logged.

Run: ``.venv/bin/python -m benchmarks.adaptive``.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

MB = 1_000_000
NETWORK = 125 * MB
#: broker 2's link: (virtual second, bytes/s) steps; the last one restores it
LINK_STEPS = ((20.0, 9.5 * MB), (150.0, 5.5 * MB), (270.0, NETWORK))
COLD, FAST, SLOW = 280, 2, 2  # partitions of each topic
SAMPLE_SECONDS = 0.5
THROTTLE = 60 * MB
CAP = 8


@dataclass
class Figures:
    """What one run showed.

    :param breach_seconds: partition-seconds under min ISR (cluster side)
    :param least_isr: the smallest ISR size seen, per topic
    :param moving_seconds: seconds the run took (virtual on the simulator)
    :param caps: broker 2's cap at each progress report
    :param changes: the cap changes the executor logged, with their reasons
    :param outcome: the run's outcome
    :param first_breach: topic -> seconds into the run of its first partition under min ISR
    :param isr_changes: "at s: topic's smallest ISR a->b", as sampled
    """

    breach_seconds: float = 0.0
    least_isr: dict[str, int] = field(default_factory=dict)
    moving_seconds: float = 0.0
    caps: list[int] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    outcome: str = ""
    first_breach: dict[str, float] = field(default_factory=dict)
    isr_changes: list[str] = field(default_factory=list)
    _smallest: dict[str, int] = field(default_factory=dict, repr=False)

    def cap_range(self) -> str:
        """Broker 2's least..greatest cap over the run."""
        return f"{min(self.caps)}..{max(self.caps)}" if self.caps else "-"

    def least_by_kind(self) -> dict[str, int]:
        """The least ISR per topic, named by its last part (``cold``, ``fast``, ``slow``)."""
        return {t.rsplit("-", 1)[-1]: n for t, n in self.least_isr.items()}

    def sample(self, sizes: dict[str, list[int]], min_isr: dict[str, int], dt: float, at: float) -> None:
        """One reading of every ISR: ``sizes`` topic -> ISR size of each partition, ``dt`` seconds
        since the last reading, ``at`` seconds into the run."""
        for name, need in min_isr.items():
            got = sizes.get(name, [])
            for size in got:
                self.least_isr[name] = min(self.least_isr.get(name, size), size)
                if size < need:
                    self.breach_seconds += dt
                    self.first_breach.setdefault(name, at)
            now = min(got, default=0)
            before = self._smallest.get(name, now)
            if now != before:
                self.isr_changes.append(f"{at:.0f} s {name.rsplit('-', 1)[-1]} {before}->{now}")
            self._smallest[name] = now


@dataclass(frozen=True)
class SimScenario:
    """One plan against links that change during the run, on the simulator in virtual time.

    :param snapshot: the cluster
    :param plan: the reassignment
    :param steps: (seconds into the run, {broker: its link's bytes/s}) in order
    :param params: the run's parameters (``adaptive_concurrency`` is set per run)
    :param warm_seconds: virtual seconds the producers write before the run starts
    :param broker: the broker whose cap the figures follow
    """

    snapshot: dict[str, Any]
    plan: dict[str, Any]
    steps: tuple[tuple[float, dict[int, float]], ...]
    params: dict[str, Any]
    warm_seconds: float = 0.0
    broker: str = "2"


def snapshot() -> dict[str, Any]:
    """Brokers 1-6; broker 2 leads every partition (each topic's partitions alternate followers 1, 3)."""
    tests = str(Path(__file__).resolve().parents[1] / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from sim_snapshots import make_snapshot

    def led_by_2(count: int, rf: int) -> list[list[int]]:
        return [[2, 1, 3][:rf] if p % 2 else [2, 3, 1][:rf] for p in range(count)]

    return make_snapshot(brokers=6, network_bytes_per_sec=NETWORK, topics={
        "cold": {"partitions": COLD, "rf": 2, "size_bytes": 100 * MB, "replicas": led_by_2(COLD, 2)},
        "fast": {"partitions": FAST, "rf": 2, "bytes_in_per_sec": MB, "size_bytes": 1_500 * MB,
                 "configs": {"min.insync.replicas": "1"}, "replicas": led_by_2(FAST, 2)},
        "slow": {"partitions": SLOW, "rf": 3, "bytes_in_per_sec": MB // 2, "size_bytes": 100 * MB,
                 "configs": {"min.insync.replicas": "2"}, "replicas": led_by_2(SLOW, 3)}})


def plan() -> dict[str, Any]:
    """The followers of ``cold`` and ``fast`` move to brokers 4-6; broker 2, their leader, sources every copy."""
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": [2, 4 + p % 3]}
                                         for t, count in (("fast", FAST), ("cold", COLD)) for p in range(count)]}


class IsrWatch:
    """A virtual ``sleep`` that steps the links and samples every ISR from the model."""

    def __init__(self, model: Any, figures: Figures, steps: tuple[tuple[float, dict[int, float]], ...]) -> None:
        self.model = model
        self.figures = figures
        self.steps = list(steps)
        self.t0 = model.sim_time()
        self.min_isr = {t.name: int(t.configs.get("min.insync.replicas", "1")) for t in model.topics.values()}

    def sleep(self, seconds: float) -> None:
        # at least a microsecond: a sleep that leaves the clock where it was would wait forever
        left = max(seconds, 1e-6)
        while left > 1e-9:
            dt = min(SAMPLE_SECONDS, left)
            self.model.advance_by(dt)
            left -= dt
            while self.steps and self.elapsed() >= self.steps[0][0]:
                for broker, rate in self.steps.pop(0)[1].items():
                    self.model.set_network(broker, rate)
            sizes = {name: [len(p.isr) for p in topic.partitions] for name, topic in self.model.topics.items()}
            self.figures.sample(sizes, self.min_isr, dt, self.elapsed())

    def elapsed(self) -> float:
        return self.model.sim_time() - self.t0


class CapLog(logging.Handler):
    """Collects the executor's cap changes, each with the seconds into the run ``clock`` gives."""

    def __init__(self, changes: list[str], clock: Callable[[], float] | None = None) -> None:
        super().__init__(logging.INFO)
        self.changes = changes
        self.clock = clock

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if " per broker (" in message or "cluster cap" in message:
            change = message.split(": ", 1)[-1]
            self.changes.append(change if self.clock is None else f"{self.clock():.0f} s: {change}")


def scenario() -> SimScenario:
    """This module's scenario: broker 2's link degrading in two steps under eight copies."""
    # A 60 s poll gives each broker two minutes of the throttle as its byte budget (7.2 GB),
    # so the count cap, the thing adaptive concurrency moves, is what binds here.
    return SimScenario(snapshot(), plan(), tuple((t, {2: rate}) for t, rate in LINK_STEPS),
                       {"poll_interval_seconds": 60, "produce_sample_seconds": 0, "throttle_bytes_per_sec": THROTTLE,
                        "stall_window_seconds": 3000, "max_movements_per_broker": CAP})


def run(adaptive: bool, cluster_factory: Callable[[dict[str, Any]], Any] | None = None,
        sim: SimScenario | None = None) -> Figures:
    """One run of the plan against the changing links, with adaptive or fixed caps.

    :param adaptive: the run's ``adaptive_concurrency``
    :param cluster_factory: builds a started SimulatedCluster in virtual time (tests pass theirs)
    :param sim: the scenario (default :func:`scenario`)
    """
    from kafka_sim import SimulatedCluster

    sim = sim or scenario()
    own = cluster_factory is None
    if cluster_factory is None:
        cluster = SimulatedCluster(sim.snapshot, time_scale=0.0)
        cluster.start()
    else:
        cluster = cluster_factory(sim.snapshot)
    try:
        if sim.warm_seconds:
            cluster.model.advance_by(sim.warm_seconds)
        return _run_on(cluster, sim, adaptive)
    finally:
        if own:
            cluster.stop()


def _run_on(cluster: Any, sim: SimScenario, adaptive: bool) -> Figures:
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.execution.progress import ProgressView
    from kafka_reassign.run.reassign import run_reassignment
    from kafka_reassign.throttle.record import MemoryRecordStore

    figures = Figures()
    watch = IsrWatch(cluster.model, figures, sim.steps)
    views: list[ProgressView] = []
    handler = CapLog(figures.changes, watch.elapsed)
    executor_log = logging.getLogger("kafka_reassign.execution.executor")
    executor_log.addHandler(handler)
    try:
        with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            result = run_reassignment(
                admin, sim.plan, {**sim.params, "adaptive_concurrency": adaptive},
                MemoryRecordStore(), on_event=lambda m: None, sleep=watch.sleep, clock=cluster.model.now,
                guard_every=0, on_progress=views.append)
    finally:
        executor_log.removeHandler(handler)
    figures.outcome = result.progress.outcome
    figures.moving_seconds = watch.elapsed()
    cap = sim.params["max_movements_per_broker"]
    figures.caps = [int(v.reduced_broker_caps.get(sim.broker, v.broker_cap or cap)) for v in views]
    return figures


def main() -> int:
    print("simulator figure: broker 2's link at "
          + ", ".join(f"{rate / MB:g} MB/s from {t:g} s" for t, rate in LINK_STEPS)
          + f"; it leads {COLD} cold + {FAST} fast (rf 2, min ISR 1, 1 MB/s) partitions moving and "
          f"{SLOW} slow ones (rf 3, min ISR 2, 0.5 MB/s) staying; cap {CAP} per broker")
    for adaptive in (False, True):
        f = run(adaptive)
        print(f"{'adaptive' if adaptive else 'fixed':>8}: {f.breach_seconds:7.1f} partition-s under min ISR, "
              f"least ISR {f.least_isr}, run {f.moving_seconds:4.0f} s, broker 2 cap {f.cap_range()}, "
              f"{len(f.changes)} cap change(s), {f.outcome}")
        print(f"          ISR (smallest per topic): {', '.join(f.isr_changes) or 'unchanged'}")
        for change in f.changes:
            print(f"          {change}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
