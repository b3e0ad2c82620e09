"""Benchmark (simulator figure): health-adaptive concurrency against fixed caps, as min ISR breaches.

Broker 2 leads every partition; the plan moves the followers of ``cold`` (not written) and
``fast`` (rf 2, min ISR 1, 1 MB/s a partition) to brokers 4-6, so broker 2 sources every copy.
``slow`` (rf 3, min ISR 2, 0.5 MB/s) stays. Mid-run broker 2's link degrades in two steps, each
to a speed that carries all its in-sync traffic (4 MB/s) but not next to eight copies: the
simulator shares a saturated link per partition (kafka_sim.replication_sharing, modelled from
Kafka's fetch protocol, not measured), so copies leave the in-sync followers less than their
write rate. At 9.5 MB/s only the ``fast`` followers fall behind: their partitions are at min
ISR, a signal without a breach. At 5.5 MB/s, with eight copies in flight, the ``slow`` ones do
too, both followers of a partition: it is under min ISR. With adaptive caps the first step's
signal has shrunk broker 2's cap by then; they grow back once the link is restored.

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
    :param moving_seconds: virtual seconds the run took
    :param caps: broker 2's cap at each progress report
    :param changes: the cap changes the executor logged, with their reasons
    :param outcome: the run's outcome
    """

    breach_seconds: float = 0.0
    least_isr: dict[str, int] = field(default_factory=dict)
    moving_seconds: float = 0.0
    caps: list[int] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    outcome: str = ""


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
    """A virtual ``sleep`` that steps broker 2's link and samples every ISR from the model."""

    def __init__(self, model: Any, figures: Figures) -> None:
        self.model = model
        self.figures = figures
        self.steps = list(LINK_STEPS)
        self.min_isr = {t.name: int(t.configs.get("min.insync.replicas", "1")) for t in model.topics.values()}

    def sleep(self, seconds: float) -> None:
        # at least a microsecond: a sleep that leaves the clock where it was would wait forever
        left = max(seconds, 1e-6)
        while left > 1e-9:
            dt = min(SAMPLE_SECONDS, left)
            self.model.advance_by(dt)
            left -= dt
            while self.steps and self.model.sim_time() >= self.steps[0][0]:
                self.model.set_network(2, self.steps.pop(0)[1])
            self.sample(dt)

    def sample(self, dt: float) -> None:
        least = self.figures.least_isr
        for name, topic in self.model.topics.items():
            for p in topic.partitions:
                size = len(p.isr)
                least[name] = min(least.get(name, size), size)
                if size < self.min_isr[name]:
                    self.figures.breach_seconds += dt


class CapLog(logging.Handler):
    """Collects the executor's cap changes."""

    def __init__(self, changes: list[str]) -> None:
        super().__init__(logging.INFO)
        self.changes = changes

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if " per broker (" in message or "cluster cap" in message:
            self.changes.append(message.split(": ", 1)[-1])


def run(adaptive: bool, cluster_factory: Callable[[dict[str, Any]], Any] | None = None) -> Figures:
    """One run of the plan against the degrading link, with adaptive or fixed caps.

    :param adaptive: the run's ``adaptive_concurrency``
    :param cluster_factory: builds a started SimulatedCluster in virtual time (tests pass theirs)
    """
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.execution.progress import ProgressView
    from kafka_reassign.run.reassign import run_reassignment
    from kafka_reassign.throttle.record import MemoryRecordStore
    from kafka_sim import SimulatedCluster

    own = cluster_factory is None
    if cluster_factory is None:
        cluster = SimulatedCluster(snapshot(), time_scale=0.0)
        cluster.start()
    else:
        cluster = cluster_factory(snapshot())
    figures = Figures()
    watch = IsrWatch(cluster.model, figures)
    views: list[ProgressView] = []
    handler = CapLog(figures.changes)
    executor_log = logging.getLogger("kafka_reassign.execution.executor")
    executor_log.addHandler(handler)
    started = cluster.model.sim_time()
    try:
        with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            # A 60 s poll gives each broker two minutes of the throttle as its byte budget (7.2 GB),
            # so the count cap, the thing adaptive concurrency moves, is what binds here.
            result = run_reassignment(
                admin, plan(), {"poll_interval_seconds": 60, "produce_sample_seconds": 0,
                                "throttle_bytes_per_sec": THROTTLE, "stall_window_seconds": 3000,
                                "max_movements_per_broker": CAP, "adaptive_concurrency": adaptive},
                MemoryRecordStore(), on_event=lambda m: None, sleep=watch.sleep, clock=cluster.model.now,
                guard_every=0, on_progress=views.append)
    finally:
        executor_log.removeHandler(handler)
        if own:
            cluster.stop()
    figures.outcome = result.progress.outcome
    figures.moving_seconds = cluster.model.sim_time() - started
    figures.caps = [int(v.reduced_broker_caps.get("2", v.broker_cap or CAP)) for v in views]
    return figures


def main() -> int:
    print("simulator figure: broker 2's link at "
          + ", ".join(f"{rate / MB:g} MB/s from {t:g} s" for t, rate in LINK_STEPS)
          + f"; it leads {COLD} cold + {FAST} fast (rf 2, min ISR 1, 1 MB/s) partitions moving and "
          f"{SLOW} slow ones (rf 3, min ISR 2, 0.5 MB/s) staying; cap {CAP} per broker")
    for adaptive in (False, True):
        f = run(adaptive)
        caps = f"{min(f.caps)}..{max(f.caps)}" if f.caps else "-"
        print(f"{'adaptive' if adaptive else 'fixed':>8}: {f.breach_seconds:7.1f} partition-s under min ISR, "
              f"least ISR {f.least_isr}, run {f.moving_seconds:4.0f} s, broker 2 cap {caps}, "
              f"{len(f.changes)} cap change(s), {f.outcome}")
        for change in f.changes:
            print(f"          {change}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
