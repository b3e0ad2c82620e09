"""Benchmark (simulator figure): a fixed replication throttle against the adaptive one under daily traffic.

Six brokers with 125 MB/s links. ``traffic`` (12 partitions, rf 2) has each broker lead two
partitions and follow two; its produce rate follows a day curve compressed into :data:`DAY`
virtual seconds (kafka_sim's ``set_write_rate``, changed every second): 10% of the peak at
night, 15 MB/s a partition at the peak, when each broker's clients and in-sync replication use
90 MB/s of its link. The plan moves ``cold`` (60 partitions of 2 GB, not written to) from
brokers 1-3 to 4-6. The operator leaves 20% of the link for consumers
(``broker_network_capacity_bytes_per_sec`` = 100 MB/s, which the adaptive throttle may fill).

Runs: a throttle safe at the peak (10 MB/s), a fast one (80 MB/s), and the adaptive throttle
(starts at 50 MB/s, floor 5, ceiling 100 MB/s). Each prints its moving time and the peak
per-broker utilisation clients saw, read from the simulator's logs over 12 s windows: client +
replication bytes through the broker, in and out, over the capacity given (what the adaptive
throttle counts against it), and the busier direction over the link (the simulator's links are
full duplex); and how often the adaptive throttle changed a rate.

Run: ``.venv/bin/python -m benchmarks.run adaptive_throttle``.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

MB = 1_000_000
LINK = 125 * MB
CAPACITY = 100 * MB
DAY = 800.0
PEAK = 15 * MB
COLD, COLD_SIZE = 60, 2_000 * MB
LOAD_PARTITIONS = 12
#: utilisation is averaged over this many seconds: KIP-73 quotas hold an average over 11 one-second
#: samples, so right after a rate is raised a copy may burst above it for a few seconds
WINDOW = 12.0
#: a poll every 2 virtual s: the day is compressed about 100 times, so is the poll (10 s in a real run)
POLL = 2.0

#: (topic, partition, virtual second) -> the partition's produce rate then
Curve = Callable[[str, int, float], float]


@dataclass(frozen=True)
class Mode:
    """One way to run the plan."""

    name: str
    throttle: int
    adaptive: bool = False
    floor: int = 5 * MB
    ceiling: int = 100 * MB

    def params(self) -> dict[str, Any]:
        extra = {"adaptive_throttle": True, "throttle_min_bytes_per_sec": self.floor,
                 "throttle_max_bytes_per_sec": self.ceiling,
                 "broker_network_capacity_bytes_per_sec": CAPACITY} if self.adaptive else {}
        return {"poll_interval_seconds": POLL, "produce_sample_seconds": 0, "throttle_bytes_per_sec": self.throttle,
                "stall_window_seconds": 6000, "move_timeout_minutes": 600, **extra}


@dataclass
class Figures:
    """What one run showed.

    :param moving_seconds: virtual seconds the run took
    :param peak_use: broker -> its greatest (in + out) over a window, as a share of the capacity given
    :param peak_direction: broker -> its greatest busier direction over a window, as a share of the link
    :param rates: broker -> the rates the adaptive throttle set, in order
    :param changes: the rate changes the progress views named
    :param views: the progress views
    """

    moving_seconds: float = 0.0
    peak_use: dict[int, float] = field(default_factory=dict)
    peak_direction: dict[int, float] = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)
    views: list[Any] = field(default_factory=list)
    outcome: str = ""


def day_curve(topic: str, partition: int, t: float) -> float:
    """Night at 0, peak at DAY/2: 10% .. 100% of :data:`PEAK`."""
    return PEAK * (0.55 - 0.45 * math.cos(2 * math.pi * t / DAY)) if topic == "traffic" else 0.0


def snapshot(cold: int = COLD, cold_size: int = COLD_SIZE) -> dict[str, Any]:
    """Brokers 1-6; ``traffic`` led two partitions per broker; ``cold`` on brokers 1-3."""
    tests = str(Path(__file__).resolve().parents[1] / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from sim_snapshots import make_snapshot

    traffic = [[1 + p % 6, 1 + (p + 1) % 6] for p in range(LOAD_PARTITIONS)]
    return make_snapshot(brokers=6, network_bytes_per_sec=LINK, topics={
        "traffic": {"partitions": LOAD_PARTITIONS, "rf": 2, "size_bytes": 100 * MB, "replicas": traffic,
                    "bytes_in_per_sec": day_curve("traffic", 0, 0.0)},
        "cold": {"partitions": cold, "rf": 1, "size_bytes": cold_size, "replicas": [[1 + p % 3] for p in range(cold)]}})


def plan(cold: int = COLD) -> dict[str, Any]:
    """Each ``cold`` partition moves from broker b (1-3) to b + 3."""
    return {"version": 1, "partitions": [{"topic": "cold", "partition": p, "replicas": [4 + p % 3]}
                                         for p in range(cold)]}


class TrafficClock:
    """A virtual ``sleep`` that follows the produce curve and measures each broker's link use."""

    def __init__(self, model: Any, curve: Curve, figures: Figures) -> None:
        self.model = model
        self.curve = curve
        self.figures = figures
        self.parts = [p for t in model.topics.values() for p in t.partitions]
        self.window_start = model.sim_time()
        self.sizes = self._sizes()
        self._set_rates()

    def _sizes(self) -> dict[tuple[str, int, int], float]:
        return {(p.topic, p.index, b): r.exact_bytes() for p in self.parts for b in p.replicas
                if (r := p.replica(b)) is not None}

    def _set_rates(self) -> None:
        t = self.model.sim_time()
        for p in self.parts:
            rate = self.curve(p.topic, p.index, t)
            if rate != p.bytes_in_per_sec:
                self.model.set_write_rate(p.topic, p.index, rate)

    def sleep(self, seconds: float) -> None:
        left = max(seconds, 1e-6)  # a sleep that leaves the clock where it was would wait forever
        while left > 1e-9:
            dt = min(1.0, left)
            self.model.advance_by(dt)
            left -= dt
            self._set_rates()
            if self.model.sim_time() - self.window_start >= WINDOW:
                self._measure()

    def _measure(self) -> None:
        """Bytes in (every replica's growth) and out (a leader's, once per follower that grew) per broker."""
        now, sizes = self.model.sim_time(), self._sizes()
        seconds = now - self.window_start
        bytes_in: dict[int, float] = {}
        bytes_out: dict[int, float] = {}
        for p in self.parts:
            for b in p.replicas:
                grew = max(0.0, sizes.get((p.topic, p.index, b), 0.0) - self.sizes.get((p.topic, p.index, b), 0.0))
                bytes_in[b] = bytes_in.get(b, 0.0) + grew
                if b != p.leader:
                    bytes_out[p.leader] = bytes_out.get(p.leader, 0.0) + grew
        f = self.figures
        for b in set(bytes_in) | set(bytes_out):
            n_in, n_out = bytes_in.get(b, 0.0) / seconds, bytes_out.get(b, 0.0) / seconds
            f.peak_use[b] = max(f.peak_use.get(b, 0.0), (n_in + n_out) / CAPACITY)
            f.peak_direction[b] = max(f.peak_direction.get(b, 0.0), max(n_in, n_out) / LINK)
        self.sizes, self.window_start = sizes, now


def changes_seen(views: list[Any]) -> list[str]:
    """The rate changes the progress views named, in order (each view names its last poll's)."""
    out: list[str] = []
    last = ""
    for v in views:
        if v.throttle_change and v.throttle_change != last:
            out += v.throttle_change.split("; ")
            last = v.throttle_change
    return out


def run(mode: Mode, curve: Curve = day_curve, snap: dict[str, Any] | None = None, moves: dict[str, Any] | None = None,
        cluster_factory: Callable[[dict[str, Any]], Any] | None = None,
        before: Callable[[Any], None] | None = None) -> Figures:
    """One run of the plan under ``curve`` in virtual time.

    :param cluster_factory: builds a started SimulatedCluster in virtual time (tests pass theirs)
    :param before: called with the admin before the run (a test sets prior throttle values)
    """
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.run.reassign import run_reassignment
    from kafka_reassign.throttle.record import MemoryRecordStore
    from kafka_sim import SimulatedCluster

    snap = snapshot() if snap is None else snap
    own = cluster_factory is None
    cluster = SimulatedCluster(snap, time_scale=0.0) if cluster_factory is None else cluster_factory(snap)
    if own:
        cluster.start()
    figures = Figures()
    clock = TrafficClock(cluster.model, curve, figures)
    started = cluster.model.sim_time()
    try:
        with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            if before is not None:
                before(admin)
            result = run_reassignment(admin, plan() if moves is None else moves, mode.params(), MemoryRecordStore(),
                                      on_event=lambda m: None, sleep=clock.sleep, clock=cluster.model.now,
                                      on_progress=figures.views.append)
    finally:
        if own:
            cluster.stop()
    figures.outcome = result.progress.outcome if result.progress else "none"
    figures.moving_seconds = cluster.model.sim_time() - started
    figures.changes = changes_seen(figures.views)
    return figures


MODES = (Mode("fixed 10 MB/s (safe at peak)", 10 * MB), Mode("fixed 80 MB/s (fast)", 80 * MB),
         Mode("adaptive 5..100 MB/s", 50 * MB, adaptive=True))


def main() -> int:
    print(f"simulator figure: 6 brokers, {LINK // MB} MB/s links; produce follows a day of {DAY:g} virtual s "
          f"(10%..100% of {PEAK // MB} MB/s a partition: clients use up to 90 MB/s of each link); moving "
          f"{COLD} x {COLD_SIZE // MB} MB from brokers 1-3 to 4-6; capacity given {CAPACITY // MB} MB/s")
    for mode in MODES:
        f = run(mode)
        peak, direction = max(f.peak_use.values(), default=0.0), max(f.peak_direction.values(), default=0.0)
        print(f"  {mode.name:>30}: moved in {f.moving_seconds:5.0f} virtual s ({f.moving_seconds / DAY:.2f} day); "
              f"peak per broker: in + out {peak:6.1%} of the capacity given, busier direction {direction:6.1%} "
              f"of the link; {len(f.changes)} rate change(s); {f.outcome}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
