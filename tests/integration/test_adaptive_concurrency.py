"""Health-adaptive concurrency against the simulator, in virtual time: a broker's link degrades
mid-run, the followers it carries leave the ISR, the caps of the brokers involved shrink, and
grow back once the link is restored and the ISR is whole again.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.errors import ParamError
from kafka_reassign.execution.progress import ProgressView
from kafka_reassign.run.reassign import run_reassignment
from kafka_reassign.throttle.record import MemoryRecordStore

PARTITIONS = 12
SLOW_AT, RESTORE_AT = 20.0, 120.0
NETWORK, DEGRADED = 125_000_000.0, 3_000_000.0


def snapshot() -> dict:
    """Topic ``t`` on brokers 1-3, min ISR 2, written to at 1 MB/s per partition."""
    from sim_snapshots import make_snapshot

    return make_snapshot(brokers=6, network_bytes_per_sec=NETWORK, topics={"t": {
        "partitions": PARTITIONS, "rf": 3, "bytes_in_per_sec": 1_000_000, "size_bytes": 800_000_000,
        "configs": {"min.insync.replicas": "2"},
        "replicas": [[1 + (p + i) % 3 for i in range(3)] for p in range(PARTITIONS)]}})


def plan() -> dict:
    return {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [4 + (p + i) % 3 for i in range(3)]}
                                         for p in range(PARTITIONS)]}


def degrade_broker_2(model: Any, exposure: list[int]) -> Callable[[float], None]:
    """A virtual ``sleep``: broker 2's link drops to 3 MB/s at SLOW_AT and is restored at RESTORE_AT.

    :param exposure: gets, at every half second from SLOW_AT + 40 s (the ISR has shrunk: 30 s of
        replica.lag.time.max.ms) to RESTORE_AT, the moves in flight involving broker 2
    """
    done: set[str] = set()

    def sleep(seconds: float) -> None:
        # At least a microsecond: the executor's wait sleeps until an exact time, and a sleep that
        # leaves the clock where it was (a float remainder of 1e-14 s) would have it wait forever.
        left = max(seconds, 1e-6)
        while left > 1e-9:
            dt = min(0.5, left)
            model.advance_by(dt)
            left -= dt
            t = model.sim_time()
            if t >= SLOW_AT and "slow" not in done:
                done.add("slow")
                model.set_network(2, DEGRADED)
            if SLOW_AT + 40.0 <= t < RESTORE_AT:
                exposure.append(sum(1 for _t, _p, replicas, adding, _r in model.list_reassignments(None)
                                    if 2 in replicas or 2 in adding))
            if t >= RESTORE_AT and "restore" not in done:
                done.add("restore")
                model.set_network(2, NETWORK)
    return sleep


def run(sim_cluster: Any, params: dict, exposure: list[int] | None = None) -> tuple[list[ProgressView], Any]:
    cluster = sim_cluster(snapshot(), time_scale=0.0)
    model = cluster.model
    views: list[ProgressView] = []
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        result = run_reassignment(admin, plan(), {"poll_interval_seconds": 5, "produce_sample_seconds": 0,
                                                  "throttle_bytes_per_sec": 30_000_000, "stall_window_seconds": 3000,
                                                  "max_movements_per_broker": 8, **params},
                                  MemoryRecordStore(), on_event=lambda m: None, sleep=degrade_broker_2(model, [] if exposure is None else exposure),
                                  clock=model.now, guard_every=0, on_progress=views.append)
    return views, result


def test_caps_shrink_for_the_brokers_losing_isr_and_grow_back_once_healthy(sim_cluster, caplog):
    caplog.set_level(logging.WARNING, logger="kafka_reassign.execution.executor")
    views, result = run(sim_cluster, {})
    assert result.progress.outcome == "done"
    changes = [r.getMessage().split(": ", 1)[1] for r in caplog.records if " per broker (" in r.getMessage()
               or "cluster cap" in r.getMessage()]
    shrinks = [c for c in changes if "caps 8->4 per broker" in c]
    assert shrinks and "broker(s) 1, 2, 3" in shrinks[0] and "at min ISR (t-" in shrinks[0], changes
    assert any("caps 4->2 per broker" in c for c in changes), changes  # halved again, down to the floor
    assert not any("->1 per broker" in c for c in changes), changes  # never below the floor (2)
    # The caps were lowered while broker 2's link was degraded, and grew back after it was restored.
    lowered = [v for v in views if v.reduced_broker_caps.get("2")]
    assert lowered and views.index(lowered[0]) > 0  # not before the link was degraded
    assert min(int(v.reduced_broker_caps["2"]) for v in lowered) == 2
    grown = [c for c in changes if "healthy for 60 s" in c and "->" in c]
    assert grown, changes
    final = result.progress
    assert final.broker_cap == 8 and "last change:" in final.summary()
    assert views[-1].cap_change and "caps " in views[-1].caps_line()
    # Once whole again the brokers' caps came back to the configured 8.
    assert not final.reduced_broker_caps, final.reduced_broker_caps


def test_fixed_caps_never_change_and_never_lean_less_on_the_troubled_broker(sim_cluster, caplog):
    """Broker 2's 3 MB/s link cannot carry its in-sync traffic even with no move, so both runs
    see the same ISR losses. Fixed caps never change; adaptive caps never put more moves on the
    troubled broker (here the byte budget already holds both runs to the same few: the ISR that
    adaptive caps protect when the count cap binds is the next test)."""
    caplog.set_level(logging.WARNING, logger="kafka_reassign.execution.executor")
    fixed: list[int] = []
    views, result = run(sim_cluster, {"adaptive_concurrency": False}, fixed)
    assert result.progress.outcome == "done"
    assert not [r for r in caplog.records if "per broker (" in r.getMessage()]
    assert all(not v.reduced_broker_caps and not v.cap_change for v in views)
    adaptive: list[int] = []
    assert run(sim_cluster, {}, adaptive)[1].progress.outcome == "done"
    assert fixed and adaptive
    assert sum(adaptive) / len(adaptive) <= sum(fixed) / len(fixed), (sum(adaptive) / len(adaptive),
                                                                      sum(fixed) / len(fixed))


def test_adaptive_caps_keep_every_partition_at_min_isr_where_fixed_caps_breach_it(sim_cluster):
    """benchmarks.adaptive: copies out of broker 2 share its degrading link per partition with its
    in-sync followers. At the first step the ``fast`` partitions (min ISR 1) lose their follower, a
    signal; at the second, with the caps still at 8, both followers of each ``slow`` partition
    (min ISR 2) fall out, again and again. The ISR is sampled from the simulator's model, not the executor."""
    from benchmarks.adaptive import CAP, run as run_scenario

    def virtual(snap: dict) -> Any:  # as the benchmark's own run: at time scale 1 the wall clock
        return sim_cluster(snap, time_scale=0.0)  # would add its own seconds between the sleeps

    fixed = run_scenario(False, virtual)
    assert fixed.outcome == "done" and not fixed.changes and set(fixed.caps) == {CAP}
    assert fixed.least_isr["slow"] == 1 and fixed.breach_seconds > 0, fixed
    # Under min ISR the high watermark stays put, so both followers are back at their next fetch and
    # out again at the next isr-expiration run: every 15 s while the link stays degraded (as on Kafka)
    drops = [int(c.split(" s ")[0]) for c in fixed.isr_changes if c.endswith("slow 3->1")]
    assert len(drops) >= 3 and {b - a for a, b in zip(drops, drops[1:])} == {15}, fixed.isr_changes

    adaptive = run_scenario(True, virtual)
    assert adaptive.outcome == "done"
    assert adaptive.least_isr["slow"] == 3 and adaptive.breach_seconds == 0, adaptive
    assert adaptive.least_isr["fast"] == 1  # the signal: at min ISR, not under
    shrinks = [c for c in adaptive.changes if f"caps {CAP}->4 per broker" in c]
    assert shrinks and "broker(s) 1, 2, 3" in shrinks[0] and "at min ISR (fast-0, fast-1)" in shrinks[0], adaptive.changes
    assert min(adaptive.caps) == 2 and adaptive.caps[0] == CAP  # down to the floor, not before the trouble
    assert any("healthy for 60 s" in c for c in adaptive.changes), adaptive.changes
    assert adaptive.caps[-1] == CAP  # grown back once the link was restored


def test_a_floor_above_the_cap_is_refused_before_any_write(sim_cluster):
    cluster = sim_cluster(snapshot(), time_scale=0.0)
    writes = cluster.model.write_count
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        with pytest.raises(ParamError, match="min_movements_per_broker=9 is above max_movements_per_broker=8"):
            run_reassignment(admin, plan(), {"max_movements_per_broker": 8, "min_movements_per_broker": 9},
                             MemoryRecordStore(), on_event=lambda m: None)
    assert cluster.model.write_count == writes


def test_the_real_kafka_scenario_on_the_simulator_drops_and_recovers_as_the_real_cluster_did(sim_cluster):
    """benchmarks.real_kafka_adaptive's scenario built as a snapshot (brokers 1 and 3's links for
    the shaped connections). On Kafka 4.3.1 (docs/REAL_KAFKA.md) fixed caps dropped ``slow`` to
    ISR 1 every 15 s from 184 s until the link recovered at 330 s; adaptive caps halved at 63 s
    and 123 s and kept every partition at min ISR."""
    from benchmarks.adaptive import run as run_scenario
    from benchmarks.real_kafka_adaptive import CAP, sim_scenario

    def virtual(snap: dict) -> Any:
        return sim_cluster(snap, time_scale=0.0)

    fixed = run_scenario(False, virtual, sim=sim_scenario())
    drops = [int(c.split(" s ")[0]) for c in fixed.isr_changes if c.endswith("slow 3->1")]
    assert fixed.outcome == "done" and 150 < drops[0] < 200 and drops[-1] < 330, fixed.isr_changes
    assert {b - a for a, b in zip(drops, drops[1:])} == {15}, fixed.isr_changes
    adaptive = run_scenario(True, virtual, sim=sim_scenario())
    assert adaptive.outcome == "done" and adaptive.breach_seconds == 0, adaptive
    assert [c.split(": ", 1)[0] for c in adaptive.changes[:2]] == ["63 s", "123 s"], adaptive.changes
    assert f"caps {CAP}->4 per broker" in adaptive.changes[0] and min(adaptive.caps) == 2
