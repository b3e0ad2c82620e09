"""The adaptive throttle on the simulator (virtual time): produce load rises on broker 1 mid-run,
its throttle drops (not below the floor) and rises back once the load falls; afterwards every
throttle config holds its value from before the run."""
from __future__ import annotations

from typing import Any

import pytest

from benchmarks.adaptive_throttle import MB, Mode, plan, run, snapshot
from kafka_reassign.throttle.specs import BROKER_KEYS, FOLLOWER_RATE, LEADER_RATE

FLOOR = 5 * MB
HIGH_FROM, HIGH_UNTIL = 40.0, 120.0
COLD, COLD_SIZE = 9, 3_000 * MB
#: set before the run: the record must give them back exactly
PRIORS = {("broker", "1"): {FOLLOWER_RATE: str(300 * MB)}, ("broker", "4"): {LEADER_RATE: str(250 * MB)}}


def broker_1_spikes(topic: str, partition: int, t: float) -> float:
    """1 MB/s a ``traffic`` partition; those broker 1 leads (0 and 6) at 20 MB/s for a while."""
    if topic != "traffic":
        return 0.0
    return 20 * MB if partition % 6 == 0 and HIGH_FROM <= t < HIGH_UNTIL else MB


def set_priors(admin: Any) -> None:
    from kafka_reassign.throttle.specs import ConfigChange

    admin.alter_configs([ConfigChange(rt, name, key, None, value)
                         for (rt, name), values in PRIORS.items() for key, value in values.items()])


def test_load_on_one_broker_lowers_its_throttle_and_the_priors_come_back(sim_cluster):
    clusters: list[Any] = []

    def factory(snap: dict[str, Any]) -> Any:
        clusters.append(sim_cluster(snap, time_scale=0.0))
        return clusters[-1]

    mode = Mode("adaptive", 50 * MB, adaptive=True, floor=FLOOR, ceiling=100 * MB)
    figures = run(mode, broker_1_spikes, snapshot(COLD, COLD_SIZE), plan(COLD), factory, before=set_priors)
    assert figures.outcome == "done", figures.outcome

    rates = [int(v.broker_throttles["1"]) for v in figures.views if "1" in v.broker_throttles]
    low = min(rates)
    assert FLOOR <= low < 25 * MB, rates  # dropped under the load, never below the floor
    assert max(rates[:rates.index(low)]) > 70 * MB, rates  # high before the load ...
    assert max(rates[rates.index(low):]) > 70 * MB, rates  # ... and again once it fell
    lowered = [c for c in figures.changes if c.startswith("broker 1: throttle lowered")]
    assert lowered and "client traffic" in lowered[0], figures.changes
    assert any("throttle 1: " in v.summary() for v in figures.views)

    # Every throttle config is back to its value before the run (set ones and absent ones alike).
    from kafka_reassign.cluster.admin import KafkaAdmin

    with KafkaAdmin(bootstrap_servers=clusters[0].bootstrap_servers) as admin:
        now = admin.describe_configs(broker_ids=range(1, 7), topics=["cold", "traffic"], keys=None)
    for b in range(1, 7):
        for key in BROKER_KEYS:
            assert now[("broker", str(b))].get(key) == PRIORS.get(("broker", str(b)), {}).get(key), (b, key, now)
    for topic in ("cold", "traffic"):
        assert now[("topic", topic)].get("leader.replication.throttled.replicas") is None
        assert now[("topic", topic)].get("follower.replication.throttled.replicas") is None


def test_the_floor_is_raised_to_the_stall_point_and_a_ceiling_below_it_refused_before_any_write(sim_cluster):
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.errors import ParamError
    from kafka_reassign.run.prepare import prepare

    cluster = sim_cluster(snapshot(3, 100 * MB), time_scale=0.0)
    rates = {("cold", p): 8 * MB for p in range(3)}  # written to while they move
    params = {**Mode("adaptive", 50 * MB, adaptive=True, floor=FLOOR, ceiling=100 * MB).params(),
              "produce_sample_seconds": 0}
    writes = cluster.model.write_count
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        prepared = prepare(admin, plan(3), params, produce_rates=rates)
        floor = prepared.params.throttle_min_bytes_per_sec
        assert 8 * MB < floor < 50 * MB, floor
        assert any("floor raised from 5.0 MB/s to the pre-flight stall point" in w for w in prepared.warnings)
        assert prepared.limits().throttle_min_bytes_per_sec == floor  # what the executor gets
        low = {**params, "throttle_max_bytes_per_sec": 6 * MB, "throttle_min_bytes_per_sec": 2 * MB,
               "allow_stalling_moves": True}
        with pytest.raises(ParamError, match="below the pre-flight stall point"):
            prepare(admin, plan(3), low, produce_rates=rates)
    assert cluster.model.write_count == writes
