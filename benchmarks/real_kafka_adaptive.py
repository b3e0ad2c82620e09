"""Benchmark (real Apache Kafka 4.3.1): health-adaptive concurrency against fixed caps, as min ISR breaches.

The real-Kafka side of :mod:`benchmarks.adaptive` (a simulator figure). Broker 2 of a local
6-broker cluster leads every partition:

* ``cold``: ``COLD`` partitions of 3 MB, not written, on [2,4] (even) and [2,5] (odd); the plan
  moves them to [2,1] and [2,3], so every cold move is a copy from broker 2 to broker 1 or 3;
* ``fast``: 2 partitions (rf 2, min ISR 1) of 30 MB written at 250 kB/s each, [2,1] and [2,3];
  the plan swaps their followers, so each stays in flight with its in-sync follower on one of
  1 and 3 and its new replica on the other;
* ``slow``: 2 partitions (rf 3, min ISR 2) written at 62.5 kB/s each on [2,1,3] and [2,3,1]:
  not moved. Both of its followers leaving the ISR is a breach.

Broker 2's replies on broker 1's and on broker 3's fetch connections are shaped with ``tc`` on
the loopback (one htb class each) in three steps (:data:`LINK_STEPS`). A follower fetches at most
``replica.fetch.max.bytes`` of each partition per round trip (256 KiB on this cluster, a quarter
of Kafka's default, so the data and the times stay small), and a round trip lasts as long as the
link takes to carry the whole response, so each copy in flight on a connection lengthens the
in-sync partitions' round trips: a partition written at ``P`` keeps up while ``P`` times the
round trip stays under 256 KiB. With three cold copies on each link (the fixed caps), at 750 kB/s
the ``fast`` followers fall behind and the ``slow`` ones keep up (a signal: ``fast`` is at min ISR);
at 350 kB/s the ``slow`` ones fall behind too and ``slow`` is under min ISR. With one cold copy or
none they keep up at 350 kB/s.

The producers use acks=1, as calibration h. An acks=all producer is slowed by its followers'
link instead: the leader holds each produce request until the in-sync followers have it, so the
ISR does not shrink but the producer's rate and latency suffer (measured on this setup: 30 kB/s
written instead of 250, produce requests timing out after 60 s).

The per-broker cap is 8 (``max_movements_per_broker``): broker 2 sources every move, so with both
``fast`` moves in flight six cold moves fit, about three on each link. With ``adaptive_concurrency``
the first signal halves broker 2's cap (the floor is 2) before the second step; the caps grow back
once the link is unshaped and the ISR whole.

The ISR is sampled from the cluster (confluent-kafka Metadata, every 0.5 s), not from the tool.
Prints, for both runs: partition-seconds under min ISR, the least ISR size seen per topic and
when it changed, the run's duration, broker 2's cap (least..greatest), the cap changes the
executor logged with their times, and the throttle configs left on the cluster afterwards.

``--side both`` (the default) runs the same scenario on the simulator first (virtual time: the
same snapshot of brokers, topics, write rates and ``replica.fetch.max.bytes``, the plan, the
parameters, brokers 1 and 3's links stepped as the shaped connections) and prints a table of
both sides; ``--side simulator`` takes seconds, ``--side real`` only the cluster.

Run: ``.venv/bin/python -m benchmarks.real_kafka_adaptive`` (about 25 minutes; needs ``tc`` and
root for the loopback's qdisc, as calibration d and h). ``KAFKA_LOCAL_DIR`` reuses a running
cluster started with ``replica.fetch.max.bytes=262144``.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from benchmarks.adaptive import CapLog, Figures, SimScenario
from benchmarks.shaped_links import ShapedLinks

ROOT = Path(__file__).resolve().parents[1]
FETCH_BYTES = 262_144  # this cluster's replica.fetch.max.bytes
COLD, COLD_BYTES, FAST_BYTES = 170, 3_000_000, 30_000_000
FAST_RATE, SLOW_RATE = 250_000, 62_500
THROTTLE, CAP = 3_000_000, 8
#: (seconds from the run's start, bytes/s of broker 2's replies to each of brokers 1 and 3); None: unshaped
LINK_STEPS: tuple[tuple[float, float | None], ...] = ((0.0, 750_000), (150.0, 350_000), (330.0, None))
#: a run still going after this long is stopped (its moves cancelled), and says so
DEADLINE_S = 900.0
SHAPED = (1, 3)
SAMPLE_SECONDS = 0.5
CLUSTER_CONFIGS = {"replica.fetch.max.bytes": str(FETCH_BYTES)}
#: the run's parameters on both sides. A 60 s poll gives each broker two minutes of the throttle
#: as its byte budget (360 MB), more than the fast moves' bytes left, so the count cap, the thing
#: adaptive concurrency moves, is what binds here (as in benchmarks.adaptive)
PARAMS = {"throttle_bytes_per_sec": THROTTLE, "max_movements_per_broker": CAP, "poll_interval_seconds": 60,
          "stall_window_seconds": 3000}
#: seconds of steady writes before a run, one quota window
WARM_SECONDS = 12.0
#: the simulator's unshaped link, bytes/s (on the loopback nothing else binds)
LOOPBACK = 1e9
#: record batch bytes on disk: the topics are written in 16 kB records, one a batch
BATCH_BYTES = 16_384


def layouts(cold: int = COLD) -> dict[str, tuple[dict[int, list[int]], dict[int, list[int]], dict[str, str]]]:
    """topic -> (replicas now, replicas in the plan (empty: not moved), topic configs)."""
    cold_now = {p: [2, 4 + p % 2] for p in range(cold)}
    cold_then = {p: [2, 1 + 2 * (p % 2)] for p in range(cold)}
    return {
        "cold": (cold_now, cold_then, {}),
        "fast": ({0: [2, 1], 1: [2, 3]}, {0: [2, 3], 1: [2, 1]}, {"min.insync.replicas": "1"}),
        "slow": ({0: [2, 1, 3], 1: [2, 3, 1]}, {}, {"min.insync.replicas": "2"}),
    }


# ------------------------------------------------------------------ the cluster's side
class Stepper(threading.Thread):
    """Steps the links on :data:`LINK_STEPS` and samples every ISR from the cluster's Metadata."""

    def __init__(self, bootstrap: str, links: ShapedLinks, min_isr: dict[str, int], figures: Figures,
                 steps: tuple[tuple[float, float | None], ...] = LINK_STEPS) -> None:
        super().__init__(daemon=True, name="adaptive-stepper")
        from confluent_kafka.admin import AdminClient
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.links, self.min_isr, self.figures = links, min_isr, figures
        self.steps = list(steps)
        self.t0 = time.monotonic()
        self.stop_event = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        last = time.monotonic()
        while not self.stop_event.wait(SAMPLE_SECONDS):
            now = time.monotonic()
            while self.steps and now - self.t0 >= self.steps[0][0]:
                rate = self.steps.pop(0)[1]
                self.links.shape(rate) if rate is not None else self.links.clear()
            try:
                self.sample(now - last, now - self.t0)
            except Exception as e:  # noqa: BLE001 - a missed sample is reported, not fatal
                self.errors.append(str(e))
            last = now

    def sample(self, dt: float, at: float) -> None:
        topics = self.admin.list_topics(timeout=5).topics
        sizes = {name: [len(p.isrs) for p in md.partitions.values()]
                 for name in self.min_isr if (md := topics.get(name)) is not None}
        self.figures.sample(sizes, self.min_isr, dt, at)


def plan_of(prefix: str, cold: int = COLD) -> dict[str, Any]:
    """The plan: the cold and fast moves of ``prefix``'s topics."""
    return {"version": 1, "partitions": [{"topic": f"{prefix}-{name}", "partition": p, "replicas": r}
                                         for name, (_, then, _) in layouts(cold).items() for p, r in sorted(then.items())]}


def prepare_topics(bootstrap: str, prefix: str, cold: int = COLD) -> dict[str, Any]:
    """Create and fill this run's topics; the plan (cold and fast moves)."""
    from kafka_local.load import create_topic, fill
    for name, (now, _, configs) in layouts(cold).items():
        topic = f"{prefix}-{name}"
        create_topic(bootstrap, topic, now, configs)
        if name != "slow":
            size = COLD_BYTES if name == "cold" else FAST_BYTES
            fill(bootstrap, topic, {p: size for p in now}, record_bytes=16_000, batch_bytes=BATCH_BYTES)
    return plan_of(prefix, cold)


# ------------------------------------------------------------------ the simulator's side
def sim_scenario(cold: int = COLD, steps: tuple[tuple[float, float | None], ...] = LINK_STEPS) -> SimScenario:
    """The same cluster, topics, writes, plan, link steps and parameters on the simulator: brokers
    1 and 3 receive only broker 2's replies here, so their links stand for the shaped connections."""
    brokers = [{"id": b, "rack": f"rack-{(b - 1) % 3}", "log_dirs": [{"path": "/data/d0", "capacity_bytes": 1e12}],
                "network_bytes_per_sec": LOOPBACK, "configs": dict(CLUSTER_CONFIGS)} for b in range(1, 7)]
    sizes = {"cold": (COLD_BYTES, 0), "fast": (FAST_BYTES, FAST_RATE), "slow": (0, SLOW_RATE)}
    topics = []
    for name, (now, _, configs) in layouts(cold).items():
        size, rate = sizes[name]
        topics.append({"name": f"sim-{name}", "configs": dict(configs), "partitions": [
            {"partition": p, "replicas": r, "leader": r[0], "size_bytes": size, "bytes_in_per_sec": rate,
             "batch_bytes": BATCH_BYTES, "log_dirs": ["/data/d0"] * len(r)} for p, r in sorted(now.items())]})
    links = tuple((t, {b: rate or LOOPBACK for b in SHAPED}) for t, rate in steps)
    return SimScenario({"version": 1, "brokers": brokers, "topics": topics}, plan_of("sim", cold), links,
                       dict(PARAMS), warm_seconds=WARM_SECONDS)


class Stopped(Exception):
    """Raised from the progress callback to stop a run: the run cancels its moves and restores its throttle."""


def run(cluster: Any, adaptive: bool, *, steps: tuple[tuple[float, float | None], ...] = LINK_STEPS,
        cold: int = COLD, stop_when: Callable[[Any], bool] | None = None,
        deadline: float = DEADLINE_S) -> tuple[Figures, Stepper, str]:
    """One run with adaptive or fixed caps: (figures, the cluster's side, throttle configs left).

    :param steps: the links' steps (:data:`LINK_STEPS`)
    :param cold: cold partitions to move
    :param stop_when: given each progress view; True stops the run there (moves cancelled)
    :param deadline: seconds after which the run is stopped the same way
    """
    from benchmarks.calibration import Producer

    bootstrap = cluster.bootstrap_servers
    prefix = f"{'adaptive' if adaptive else 'fixed'}-{int(time.time()) % 100_000}"
    plan = prepare_topics(bootstrap, prefix, cold)
    producers = [Producer(bootstrap, f"{prefix}-fast", p, FAST_RATE, acks="1") for p in (0, 1)]
    producers += [Producer(bootstrap, f"{prefix}-slow", p, SLOW_RATE, acks="1") for p in (0, 1)]
    for prod in producers:
        prod.start()
    figures = Figures()
    links = ShapedLinks(cluster, 2, SHAPED)
    min_isr = {f"{prefix}-{n}": int(c.get("min.insync.replicas", "1")) for n, (_, _, c) in layouts().items()}
    try:
        time.sleep(WARM_SECONDS)  # a quota window of steady writes before the run measures them
        stepper = Stepper(bootstrap, links, min_isr, figures, steps)
        stepper.start()
        try:
            _execute(bootstrap, plan, adaptive, figures, stepper,
                     lambda view: time.monotonic() - stepper.t0 > deadline or bool(stop_when and stop_when(view)))
        finally:
            figures.moving_seconds = time.monotonic() - stepper.t0
            stepper.stop_event.set()
            stepper.join(10)
    finally:
        links.clear()
        for prod in producers:
            prod.stop()
    left = _throttles_left(bootstrap, cluster, list(min_isr))
    _delete_topics(bootstrap, list(min_isr))
    return figures, stepper, left


def _execute(bootstrap: str, plan: dict[str, Any], adaptive: bool, figures: Figures, stepper: Stepper,
             stop_when: Callable[[Any], bool]) -> None:
    """The tool's run of ``plan`` (in this process, as ``kafka-reassign execute`` runs it)."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.run.reassign import run_reassignment
    from kafka_reassign.throttle.record import MemoryRecordStore

    def watch(view: Any) -> None:
        figures.caps.append(int(view.reduced_broker_caps.get("2", view.broker_cap or CAP)))
        if stop_when(view):
            raise Stopped()

    handler = CapLog(figures.changes, lambda: time.monotonic() - stepper.t0)
    executor_log = logging.getLogger("kafka_reassign.execution.executor")
    executor_log.addHandler(handler)
    try:
        with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
            result = run_reassignment(
                admin, plan, {**PARAMS, "adaptive_concurrency": adaptive},
                MemoryRecordStore(), on_event=lambda m: None, on_progress=watch)
        figures.outcome = result.progress.outcome if result.progress else "nothing to move"
    except Stopped:
        figures.outcome = "stopped, its moves cancelled"
    finally:
        executor_log.removeHandler(handler)


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Best effort: a reused cluster keeps a topic whose deletion failed, and says so."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures are done
    for topic, future in admin.delete_topics(topics).items():
        try:
            future.result(timeout=60)
        except Exception as e:  # noqa: BLE001 - the figures matter more than the clean-up
            print(f"could not delete {topic}: {e}", file=sys.stderr)


def _throttles_left(bootstrap: str, cluster: Any, topics: list[str]) -> str:
    """Throttle configs on the brokers and the run's topics, read with confluent-kafka."""
    sys.path.insert(0, str(ROOT / "tests" / "real_kafka"))
    from real_kafka_checks import throttle_configs
    found = throttle_configs(bootstrap, sorted(cluster.brokers), topics)
    left = [f"{res} {k}={v}" for res, kv in found.items() for k, (v, _src) in kv.items()]
    return ", ".join(left) or "none"


@contextlib.contextmanager
def local_cluster(reuse: bool = True) -> Iterator[Any]:
    """A 6-broker cluster whose followers fetch 256 KiB of a partition per round trip.

    :param reuse: take ``KAFKA_LOCAL_DIR``'s running cluster when it is set
    """
    from kafka_local import LocalKafka
    if reuse and os.environ.get("KAFKA_LOCAL_DIR"):
        cluster = LocalKafka.load(os.environ["KAFKA_LOCAL_DIR"])
        if cluster.configs.get("replica.fetch.max.bytes") != str(FETCH_BYTES):
            raise RuntimeError(f"KAFKA_LOCAL_DIR's cluster needs replica.fetch.max.bytes={FETCH_BYTES}")
        yield cluster
        return
    with tempfile.TemporaryDirectory(prefix="bench-adaptive-") as tmp:
        cluster = LocalKafka(Path(tmp) / "cluster", 6, 3, 1, configs=CLUSTER_CONFIGS, owner_pid=os.getpid())
        cluster.up(timeout=300)
        try:
            yield cluster
        finally:
            cluster.down()


def _terminated(_signum: int, _frame: Any) -> None:
    raise SystemExit(143)  # unwinds through the run's finally: the throttle restored, the links unshaped


def _line(side: str, adaptive: bool, f: Figures, left: str | None = None) -> str:
    breach = ", ".join(f"{t.rsplit('-', 1)[-1]} at {s:.0f} s" for t, s in f.first_breach.items()) or "none"
    out = (f"{side} {'adaptive' if adaptive else 'fixed'}: {f.breach_seconds:.1f} partition-s under min ISR "
           f"(first: {breach}), least ISR {f.least_by_kind()}, run {f.moving_seconds:.0f} s, "
           f"broker 2 cap {f.cap_range()}, "
           f"{len(f.changes)} cap change(s), {f.outcome}")
    out += f"; throttle configs left: {left}" if left is not None else ""
    out += f"\n    ISR (smallest per topic): {', '.join(f.isr_changes) or 'unchanged'}"
    return out + "".join(f"\n    {change}" for change in f.changes)


def side_by_side(runs: dict[tuple[str, bool], Figures]) -> str:
    """A table of both sides' figures, run by run."""
    rows = ["| caps | side | partition-s under min ISR | slow first under | least ISR slow / fast | "
            "first cap change | broker 2's cap | run s |", "|---|---|---|---|---|---|---|---|"]
    for (side, adaptive), f in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        slow = next((s for t, s in f.first_breach.items() if t.endswith("slow")), None)
        least = f.least_by_kind()
        first = f.changes[0].split(": ", 1)[0] if f.changes else "-"
        rows.append(f"| {'adaptive' if adaptive else 'fixed'} | {side} | {f.breach_seconds:.1f} | "
                    f"{'-' if slow is None else f'{slow:.0f} s'} | {least.get('slow', '-')} / {least.get('fast', '-')} | "
                    f"{first} | {f.cap_range()} | {f.moving_seconds:.0f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from benchmarks.adaptive import run as run_on_simulator
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", choices=("both", "real", "simulator"), default="both",
                    help="the real cluster, the simulator (virtual time, seconds), or both side by side")
    args = ap.parse_args([] if argv is None and __name__ != "__main__" else argv)
    signal.signal(signal.SIGTERM, _terminated)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    print("broker 2's replies to brokers 1 and 3 at "
          + ", ".join(f"{r / 1e6:g} MB/s from {t:g} s" if r else f"unshaped from {t:g} s" for t, r in LINK_STEPS)
          + f"; it leads {COLD} cold + 2 fast (rf 2, min ISR 1, {FAST_RATE / 1e3:g} kB/s) partitions moving and 2 "
          f"slow ones (rf 3, min ISR 2, {SLOW_RATE / 1e3:g} kB/s) staying; cap {CAP} per broker, throttle "
          f"{THROTTLE / 1e6:g} MB/s, replica.fetch.max.bytes {FETCH_BYTES}", flush=True)
    t0 = time.monotonic()
    runs: dict[tuple[str, bool], Figures] = {}
    if args.side != "real":
        for adaptive in (False, True):
            runs[("simulator", adaptive)] = f = run_on_simulator(adaptive, sim=sim_scenario())
            print(_line("simulator (virtual time)", adaptive, f), flush=True)
    if args.side != "simulator":
        with local_cluster() as cluster:
            for adaptive in (False, True):
                f, side, left = run(cluster, adaptive)
                runs[("real Kafka 4.3.1", adaptive)] = f
                print(_line("real Kafka 4.3.1", adaptive, f, left), flush=True)
                if side.errors:
                    print(f"    {len(side.errors)} sample(s) missed, first: {side.errors[0]}", flush=True)
    if args.side == "both":
        print(side_by_side(runs))
    print(f"reproduce: .venv/bin/python -m benchmarks.real_kafka_adaptive --side {args.side}; "
          f"took {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
