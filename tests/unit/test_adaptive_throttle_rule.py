"""The adaptive throttle's rule, its validation and its writes through the run's record."""
from __future__ import annotations

from typing import Any, Iterable

import pytest

from kafka_reassign.errors import ParamError
from kafka_reassign.execution.wake import FlightItem, WakeRule, step_rates
from kafka_reassign.planning.validate import validate_params
from kafka_reassign.throttle.adaptive import (HYSTERESIS, Hosting, RateBounds, adapted_rate, client_traffic,
                                              floor_over_stall, partition_growth, partition_sizes, projected,
                                              rate_changes, worth_changing)
from kafka_reassign.throttle.apply import set_broker_rates
from kafka_reassign.throttle.record import MemoryRecordStore, ThrottleRecord
from kafka_reassign.throttle.specs import FOLLOWER_RATE, LEADER_RATE, ConfigChange, restore_changes

MB = 1_000_000
BOUNDS = RateBounds(capacity=100 * MB, floor=10 * MB, ceiling=80 * MB)


def test_the_rate_is_the_room_clients_leave_less_the_margin_within_the_bounds() -> None:
    assert adapted_rate(100 * MB, 40 * MB, 10 * MB, 80 * MB) == int(60 * MB * (1 - HYSTERESIS))
    assert adapted_rate(100 * MB, 95 * MB, 10 * MB, 80 * MB) == 10 * MB  # never below the floor
    assert adapted_rate(100 * MB, 120 * MB, 10 * MB, 80 * MB) == 10 * MB  # an overrun link: the floor
    assert adapted_rate(100 * MB, 0.0, 10 * MB, 80 * MB) == 80 * MB  # never above the ceiling


def test_hysteresis_keeps_a_rate_within_ten_percent_unless_the_room_fell_below_it() -> None:
    assert not worth_changing(50 * MB, 54 * MB, 60 * MB, 10 * MB, 80 * MB)  # 8% higher: kept
    assert worth_changing(50 * MB, 56 * MB, 62 * MB, 10 * MB, 80 * MB)  # 12% higher
    assert not worth_changing(50 * MB, 46 * MB, 51 * MB, 10 * MB, 80 * MB)  # 8% lower, the room still holds it
    assert worth_changing(50 * MB, 46 * MB, 49 * MB, 10 * MB, 80 * MB)  # the room fell below it: at once
    assert worth_changing(75 * MB, 80 * MB, 95 * MB, 10 * MB, 80 * MB)  # reaches the ceiling
    assert not worth_changing(10 * MB, 10 * MB, 2 * MB, 10 * MB, 80 * MB)  # at the floor already


def test_rate_changes_lower_a_loaded_broker_raise_a_freed_one_and_leave_the_rest() -> None:
    rates = {1: 50 * MB, 2: 50 * MB, 3: 50 * MB, 4: 50 * MB}
    traffic = {1: 70 * MB, 2: 5 * MB, 3: 44 * MB}  # broker 4 not measured: kept
    changes = {c.broker: c for c in rate_changes(rates, traffic, BOUNDS)}
    assert set(changes) == {1, 2}
    assert changes[1].new == int(30 * MB * (1 - HYSTERESIS)) and "lowered" in changes[1].text
    assert changes[2].new == 80 * MB and "raised" in changes[2].text
    assert "client traffic 70.0 MB/s of 100.0 MB/s" in changes[1].reason
    floor = rate_changes({1: 50 * MB}, {1: 99 * MB}, BOUNDS)[0]
    assert floor.new == 10 * MB and "floor 10.0 MB/s over the 1.0 MB/s left" in floor.reason
    per_broker = RateBounds(100 * MB, 10 * MB, 80 * MB, per_broker={1: 200 * MB})
    assert rate_changes({1: 50 * MB}, {1: 70 * MB}, per_broker)[0].new == 80 * MB


def test_client_traffic_counts_produce_in_sync_replication_in_and_out_not_the_copy() -> None:
    before = {("t", 0, 1): 1000, ("t", 0, 2): 1000, ("t", 0, 3): 1000, ("t", 1, 2): 500, ("t", 1, 4): 0}
    after = {("t", 0, 1): 3000, ("t", 0, 2): 3000, ("t", 0, 3): 2900, ("t", 1, 2): 400, ("t", 1, 4): 9000}
    copying = [("t", 1, 4)]  # a new replica being copied: its growth is the throttled copy
    growth = partition_growth(partition_sizes(before, copying), partition_sizes(after, copying), 2.0)
    assert growth == {("t", 0): 1000.0, ("t", 1): 0.0}  # t-1 shrank (retention): no growth
    hosting = {("t", 0): Hosting(leader=1, isr=(1, 2, 3)), ("t", 1): Hosting(leader=2, isr=(2,))}
    traffic = client_traffic(growth, hosting, [1, 2, 3, 4])
    # leader: produce in + two in-sync followers served; each follower: its bytes in
    assert traffic == {1: 3000.0, 2: 1000.0, 3: 1000.0, 4: 0.0}
    assert partition_growth({}, {("t", 0): 5}, 0.0) == {}


def test_rising_traffic_is_projected_one_poll_ahead_falling_traffic_is_not() -> None:
    assert projected({1: 60.0, 2: 30.0, 3: 10.0}, {1: 50.0, 2: 40.0}) == {1: 70.0, 2: 30.0, 3: 10.0}


def test_the_floor_is_raised_to_the_stall_point_or_the_run_refused() -> None:
    assert floor_over_stall(10 * MB, 80 * MB, None) == (10 * MB, None)
    assert floor_over_stall(10 * MB, 80 * MB, 5 * MB) == (10 * MB, None)
    floor, note = floor_over_stall(10 * MB, 80 * MB, 30 * MB)
    assert floor == 30 * MB and note is not None and "raised from 10.0 MB/s to the pre-flight stall point" in note
    with pytest.raises(ParamError) as err:
        floor_over_stall(10 * MB, 80 * MB, 90 * MB)
    assert err.value.problems[0].entry == "throttle_max_bytes_per_sec"
    assert "below the pre-flight stall point 90.0 MB/s" in err.value.problems[0].reason


ON = {"adaptive_throttle": True, "broker_network_capacity_bytes_per_sec": 100 * MB}


@pytest.mark.parametrize("params, field, words", [
    ({"adaptive_throttle": True}, "broker_network_capacity_bytes_per_sec", "needs each broker's network capacity"),
    ({**ON, "throttle_min_bytes_per_sec": 90 * MB, "throttle_max_bytes_per_sec": 20 * MB},
     "throttle_min_bytes_per_sec", "is above throttle_max_bytes_per_sec=20000000"),
    ({**ON, "throttle_min_bytes_per_sec": 0}, "throttle_min_bytes_per_sec", ">= 1024"),
    ({**ON, "throttle_max_bytes_per_sec": -5}, "throttle_max_bytes_per_sec", ">= 1024"),
    ({**ON, "broker_network_capacity_bytes_per_sec": 0}, "broker_network_capacity_bytes_per_sec", ">= 1024"),
    ({**ON, "throttle_bytes_per_sec": None}, "throttle_bytes_per_sec", "cannot run unthrottled"),
])
def test_bad_adaptive_settings_are_refused_naming_the_problem(params: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ParamError) as err:
        validate_params(params)
    assert any(p.entry == field and words in p.reason for p in err.value.problems), err.value.problems


def test_adaptive_settings_are_accepted_and_the_starting_rate_clamped_into_the_bounds() -> None:
    p = validate_params({**ON, "throttle_bytes_per_sec": 500 * MB, "throttle_max_bytes_per_sec": 90 * MB})
    assert (p.adaptive_throttle, p.throttle_bytes_per_sec, p.throttle_max_bytes_per_sec) == (True, 90 * MB, 90 * MB)
    off = validate_params({"throttle_min_bytes_per_sec": 90 * MB, "throttle_max_bytes_per_sec": 20 * MB})
    assert not off.adaptive_throttle  # bounds are not checked against each other when off


class Admin:
    """Records the config writes."""

    def __init__(self) -> None:
        self.writes: list[list[ConfigChange]] = []

    def alter_configs(self, changes: Iterable[ConfigChange], validate_only: bool = False) -> None:
        self.writes.append(list(changes))


def test_rate_changes_go_through_the_record_and_the_restore_gives_back_the_priors() -> None:
    store = MemoryRecordStore()
    store.put(ThrottleRecord.new("run", None, [
        ConfigChange("broker", "1", LEADER_RATE, None, str(50 * MB)),
        ConfigChange("broker", "1", FOLLOWER_RATE, str(200 * MB), str(50 * MB)),
        ConfigChange("topic", "t", "leader.replication.throttled.replicas", None, "0:1")]))
    admin = Admin()
    written = set_broker_rates(admin, store, "run", {1: 20 * MB, 2: 20 * MB})  # 2: not the run's rate
    assert [(c.name, c.key, c.prior, c.value) for c in written] == [
        ("1", LEADER_RATE, str(50 * MB), str(20 * MB)), ("1", FOLLOWER_RATE, str(50 * MB), str(20 * MB))]
    assert admin.writes == [written]
    record = store.get("run")
    assert record is not None and len(record.changes) == 3  # rewritten in place: the record does not grow
    assert set_broker_rates(admin, store, "run", {1: 20 * MB}) == [] and len(admin.writes) == 1
    set_broker_rates(admin, store, "run", {1: 70 * MB})
    undo = {(c.key, c.value) for c in restore_changes(store.get("run")) if c.resource_type == "broker"}
    assert undo == {(LEADER_RATE, None), (FOLLOWER_RATE, str(200 * MB))}  # the priors of the first write


def test_the_wake_schedule_uses_each_brokers_own_rate() -> None:
    items = {0: FlightItem((1, 4), 100.0, 0.0), 1: FlightItem((2, 5), 100.0, 0.0)}
    assert step_rates(items, 10.0, {1: 5.0}) == {0: 5.0, 1: 10.0}
    rule = WakeRule(rate=10.0, low_water=50.0, per_broker={1: 5.0})
    assert WakeRule.from_json(rule.to_json()) == rule


class MetadataAdmin(Admin):
    """Config writes, and Metadata: t-0 led by 1 (ISR 1, 2), t-1 led by 3 (ISR 3)."""

    def __init__(self) -> None:
        super().__init__()
        self.metadata_reads = 0

    def topic_metadata(self, topics: list[str] | None = None) -> list[Any]:
        from kafka_reassign.cluster.metadata import PartitionMetadata, TopicMetadata

        self.metadata_reads += 1
        return [TopicMetadata("t", (PartitionMetadata(0, 1, (1, 2), (1, 2)), PartitionMetadata(1, 3, (3,), (3,))))]


def test_rate_control_measures_between_polls_writes_only_its_brokers_and_resumes_from_its_state() -> None:
    from kafka_reassign.execution.rate_control import RateControl

    store = MemoryRecordStore()
    store.put(ThrottleRecord.new("run", None, [ConfigChange("broker", str(b), k, None, str(50 * MB))
                                               for b in (1, 2) for k in (LEADER_RATE, FOLLOWER_RATE)]))
    admin: Any = MetadataAdmin()
    control = RateControl(BOUNDS, 50 * MB, store, "run")
    sizes = {("t", 0, 1): 0, ("t", 0, 2): 0, ("t", 1, 3): 0}
    assert control.observe(admin, sizes, [], [1, 2, 3], 0.0) == []  # a first read: nothing to compare
    sizes = {("t", 0, 1): 300 * MB, ("t", 0, 2): 300 * MB, ("t", 1, 3): 300 * MB}  # 30 MB/s each for 10 s
    changes = control.observe(admin, sizes, [], [1, 2, 3], 10.0)
    # broker 1: 30 in + 30 out to its follower; broker 2: 30 in (nothing to project from yet);
    # broker 3's rate was kept lower by someone else: never written
    margin = 1 - HYSTERESIS
    assert {c.broker: c.new for c in changes} == {1: int(40 * MB * margin), 2: int(70 * MB * margin)}
    assert control.not_ours == {3} and control.rate_of(3) == 50 * MB
    assert len(admin.writes) == 1 and admin.metadata_reads == 1
    resumed = RateControl(BOUNDS, 50 * MB, store, "run")
    resumed.load(control.to_json())
    assert (resumed.rates, resumed.not_ours, resumed.last_change()) == (control.rates, {3}, control.last_change())
    sizes = {k: v + 300 * MB for k, v in sizes.items()}  # the same traffic: within the band, nothing written
    assert resumed.observe(admin, sizes, [], [1, 2, 3], 20.0) == [] and len(admin.writes) == 1


def test_brokers_with_their_own_link_capacity_are_parsed_validated_and_used() -> None:
    from kafka_reassign.execution.limits import ExecutionLimits
    from kafka_reassign.execution.rate_control import rate_control_for

    p = validate_params({**ON, "broker_network_capacities": ["3=50MB/s", "5=200000000"]})
    control = rate_control_for(ExecutionLimits.from_params(p), 50 * MB, MemoryRecordStore(), "run")
    assert control is not None
    assert (control.bounds.capacity_of(3), control.bounds.capacity_of(5), control.bounds.capacity_of(1)) == (
        50 * MB, 200 * MB, 100 * MB)
    with pytest.raises(ParamError) as err:
        validate_params({**ON, "broker_network_capacities": ["3:50MB/s", "4=1", "4=2MB/s", "4=3MB/s"]})
    reasons = [p.reason for p in err.value.problems if p.entry == "broker_network_capacities"]
    assert len(reasons) == 3 and "expected BROKER=RATE" in reasons[0] and "at least 1 KB/s" in reasons[1]
    assert "broker 4 is given twice" in reasons[2]
    assert rate_control_for(ExecutionLimits.from_params(validate_params({})), 50 * MB, None, "run") is None
