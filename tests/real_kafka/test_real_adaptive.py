"""Health-adaptive concurrency on real Kafka: copies that starve in-sync followers halve the caps.

The cluster is :mod:`benchmarks.real_kafka_adaptive`'s own (6 brokers, ``replica.fetch.max.bytes``
256 KiB), and so is the setting: broker 2 leads everything, its replies to brokers 1 and 3 are
shaped to 750 kB/s by ``tc``, and the copies on those links leave the 250 kB/s ``fast`` followers
behind while the 62.5 kB/s ``slow`` ones keep up. The benchmark has the contrast with fixed caps
(``slow`` under min ISR) and the caps growing back; here the run is stopped once broker 2's cap
is halved, which cancels its moves and restores its throttle.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

pytestmark = pytest.mark.kafka


def test_followers_falling_behind_on_a_shaped_link_halve_the_caps_and_nothing_is_left():
    if shutil.which("tc") is None:
        pytest.fail("tc (iproute2) is needed to shape the loopback: install iproute2")
    from benchmarks.real_kafka_adaptive import CAP, local_cluster, run

    with local_cluster(reuse=False) as cluster:  # the session's cluster fetches 1 MiB a partition
        figures, side, left = run(cluster, True, steps=((0.0, 750_000.0),), cold=40,
                                  stop_when=lambda view: "2" in view.reduced_broker_caps, deadline=240.0)

    assert figures.outcome == "stopped, its moves cancelled"
    assert figures.changes, f"no cap change in {figures.moving_seconds:.0f} s; ISR: {figures.isr_changes}"
    first = figures.changes[0]
    halved = first.split("broker(s) ")[1].split(")")[0].split(", ")
    assert f"caps {CAP}->{CAP // 2} per broker" in first and "2" in halved, first
    assert "at min ISR" in first and "-fast-" in first, first
    assert min(figures.caps) == CAP // 2
    slow = next(t for t in side.min_isr if t.endswith("-slow"))
    assert figures.least_isr[slow] >= 2 and slow not in figures.first_breach, figures.isr_changes
    fast = next(t for t in side.min_isr if t.endswith("-fast"))
    assert figures.least_isr[fast] == 1  # the signal came from the cluster: fast's followers left its ISR
    assert left == "none"
    assert "noqueue" in subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True).stdout
