"""The cluster's side of a benchmark run: reassignments in flight and throttle configs, sampled meanwhile."""
from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchmarks.real_kafka_cluster import Bench, throttles

if TYPE_CHECKING:
    from kafka import KafkaAdminClient


@dataclass
class Sample:
    """One look at the cluster: when, partitions of the topic in flight, placement at target, smallest ISR."""

    t: float
    in_flight: int
    at_target: bool
    min_isr: int


class Observer(threading.Thread):
    """Samples every ``interval`` s, with kafka-python, the topic's reassignments in flight and placement.

    Stops by itself once the moving phase ended (nothing in flight, placement at the target).
    """

    def __init__(self, bootstrap: str, topic: str, target: dict[int, list[int]], interval: float = 0.5,
                 timeout: float = 400) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.target = bootstrap, topic, target
        self.interval, self.timeout = interval, timeout
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self.exact_order = False
        self.stop_event = threading.Event()

    def look(self, admin: KafkaAdminClient) -> Sample:
        """One sample: ListPartitionReassignments, then the topic's metadata."""
        flight = admin.list_partition_reassignments()
        n = sum(1 for tp in flight if tp.topic == self.topic)
        (md,) = admin.describe_topics([self.topic])
        placement = {p["partition_index"]: p["replica_nodes"] for p in md["partitions"]}
        # Kafka's order of replicas is the target's; sets compared so an order quirk cannot hang the phase.
        at = all(sorted(placement.get(p, [])) == sorted(r) for p, r in self.target.items())
        self.exact_order = placement == self.target
        return Sample(time.monotonic(), n, at, min(len(p["isr_nodes"]) for p in md["partitions"]))

    def run(self) -> None:
        from kafka import KafkaAdminClient

        def connect() -> KafkaAdminClient:
            return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="bench-observer",
                                    request_timeout_ms=5000)
        admin = connect()
        deadline = time.monotonic() + self.timeout
        try:
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                t0 = time.monotonic()
                try:
                    self.samples.append(self.look(admin))
                except Exception as exc:  # noqa: BLE001 - a broker down mid-fault: reconnect, keep sampling
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    admin.close()
                    admin = connect()
                if self.phase() is not None:
                    return
                time.sleep(max(0.0, self.interval - (time.monotonic() - t0)))
        finally:
            admin.close()

    def timeline(self, every: float = 5.0) -> str:
        """Partitions in flight every ``every`` s of the moving phase (where the time went)."""
        phase = self.phase()
        if phase is None:
            return ""
        counts, next_t = [], phase[0]
        for s in self.samples:
            if phase[0] <= s.t <= phase[1] and s.t >= next_t:
                counts.append(str(s.in_flight))
                next_t += every
        return f"partitions in flight every {every:g} s: " + " ".join(counts)

    def started(self) -> bool:
        return any(s.in_flight for s in self.samples)

    def phase(self) -> tuple[float, float] | None:
        """(start, end) of the moving phase in monotonic seconds, or None while it has not ended."""
        starts = [k for k, s in enumerate(self.samples) if s.in_flight]
        if not starts:
            return None
        for s in self.samples[starts[0]:]:
            if not s.in_flight and s.at_target:
                return self.samples[starts[0]].t, s.t
        return None

    def wait_started(self, timeout: float, proc: subprocess.Popen | None = None) -> None:
        """Block until a reassignment of the topic was seen in flight (fail if ``proc`` exits first)."""
        deadline = time.monotonic() + timeout
        while not self.started():
            if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
                raise RuntimeError(f"no reassignment of {self.topic} seen in flight")
            time.sleep(0.1)


class ConfigSampler(threading.Thread):
    """Reads every throttle config every ``interval`` s during a run: did anything of others change meanwhile?"""

    def __init__(self, bench: Bench, topics: list[str], before: dict[str, str], interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.bench, self.topics, self.before, self.interval = bench, topics, before, interval
        self.changed: dict[str, set[str]] = {}
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                now = throttles(self.bench, self.topics)
            except Exception:  # noqa: BLE001 - a broker down mid-fault cannot be read
                continue
            for k, v in self.before.items():
                if now.get(k) != v:
                    self.changed.setdefault(k, set()).add(now.get(k, "deleted"))

    def finish(self) -> dict[str, set[str]]:
        """Stop sampling; key -> values other than the one before the run, as read during it."""
        self.stop_event.set()
        self.join(30)
        return self.changed
