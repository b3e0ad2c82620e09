"""KIP-73 throttle sets, merging and restoring (kafka_reassign.throttle)."""
from __future__ import annotations

from kafka_reassign.execution.steps import StepMove
from kafka_reassign.throttle.specs import (FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, LOG_DIR_RATE,
                                     STATIC_CONFIG, ConfigChange, Inherited, ThrottleSpec, effective_configs,
                                     leftovers, parse_replica_list, restore_changes, throttle_changes)

STEPS = [StepMove("orders", 3, (1, 2, 3), (4, 1, 2), size_bytes=1000),
         StepMove("orders", 5, (2, 3, 1), (2, 3, 5), size_bytes=1000),
         StepMove("orders", 6, (1, 2, 3), (2, 1, 3)),            # reorder only: no data, no throttle
         StepMove("logs", 0, (1, 2), (1, 2), ("/d2", "any"), size_bytes=10)]


def apply(configs, changes):
    """What the cluster would hold after the incremental writes (SET / DELETE)."""
    out = {k: dict(v) for k, v in configs.items()}
    for c in changes:
        d = out.setdefault(c.resource, {})
        if c.value is None:
            d.pop(c.key, None)
        else:
            d[c.key] = c.value
    return out


def test_spec_leader_is_existing_follower_is_new():
    spec = ThrottleSpec.for_moves(STEPS, 1_000_000)
    assert spec.leader == {"orders": {(3, 1), (3, 2), (3, 3), (5, 1), (5, 2), (5, 3)}}
    assert spec.follower == {"orders": {(3, 4), (5, 5)}}
    assert spec.rate_brokers == {1, 2, 3, 4, 5}
    assert spec.log_dir_brokers == {1} and spec.log_dir_rate == 1_000_000



def test_spec_without_replica_lists_keeps_the_rates_and_brokers():
    full = ThrottleSpec.for_moves(STEPS, 1_000_000, log_dir_rate=500_000)
    rates = ThrottleSpec.for_moves(STEPS, 1_000_000, log_dir_rate=500_000, replica_lists=False)
    assert rates.leader == {} and rates.follower == {}
    assert rates == ThrottleSpec(rate=1_000_000, rate_brokers=full.rate_brokers, log_dir_rate=500_000,
                                 log_dir_brokers=full.log_dir_brokers)


def test_changes_on_clean_cluster_and_idempotent():
    spec = ThrottleSpec.for_moves(STEPS, 1_000_000, log_dir_rate=500_000)
    changes = throttle_changes(spec, {})
    by = {(c.resource_type, c.name, c.key): c for c in changes}
    assert by[("topic", "orders", LEADER_REPLICAS)].value == "3:1,3:2,3:3,5:1,5:2,5:3"
    assert by[("topic", "orders", FOLLOWER_REPLICAS)].value == "3:4,5:5"
    assert by[("broker", "4", LEADER_RATE)].value == "1000000"
    assert by[("broker", "1", LOG_DIR_RATE)].value == "500000"
    assert all(c.prior is None for c in changes)
    after = apply({}, changes)
    assert throttle_changes(spec, after) == [], "applying twice changes nothing the second time"


def test_merge_with_operator_throttles():
    spec = ThrottleSpec.for_moves(STEPS[:2], 1_000_000)
    current = {("topic", "orders"): {LEADER_REPLICAS: "0:7,3:1", FOLLOWER_REPLICAS: "*"},
               ("broker", "1"): {LEADER_RATE: "500000", FOLLOWER_RATE: "9000000"}}
    notes: list[str] = []
    changes = throttle_changes(spec, current, notes)
    by = {(c.resource_type, c.name, c.key): c for c in changes}
    assert by[("topic", "orders", LEADER_REPLICAS)].value == "0:7,3:1,3:2,3:3,5:1,5:2,5:3"   # union
    assert by[("topic", "orders", LEADER_REPLICAS)].prior == "0:7,3:1"
    assert ("topic", "orders", FOLLOWER_REPLICAS) not in by                                   # '*' stays '*'
    assert ("broker", "1", LEADER_RATE) not in by                                             # theirs is lower: kept
    assert by[("broker", "1", FOLLOWER_RATE)].value == "1000000"                              # ours is lower
    assert by[("broker", "1", FOLLOWER_RATE)].prior == "9000000"
    assert any("kept" in n for n in notes) and any("'*'" in n for n in notes)


def test_a_lower_cluster_default_is_theirs_a_higher_one_is_overridden_for_the_run():
    """The lower of theirs and ours, where theirs is the value a broker inherits (kafka-configs --entity-default)."""
    spec = ThrottleSpec.for_moves(STEPS[:2], 2_000_000)     # brokers 1..5
    default = {("broker", str(b)): {LEADER_RATE: Inherited("1000000"), FOLLOWER_RATE: Inherited("40000000")}
               for b in range(1, 6)}
    current = {("broker", "3"): {LEADER_RATE: "9000000", FOLLOWER_RATE: "500000"}}   # per-broker values win
    notes: list[str] = []
    changes = throttle_changes(spec, current, notes, default)
    rates = {(c.name, c.key): c for c in changes if c.resource_type == "broker"}
    # 1 MB/s default, lower than ours: kept, nothing written or recorded on any broker but 3 (its own 9 MB/s).
    assert [n for (n, k) in rates if k == LEADER_RATE] == ["3"]
    assert (rates[("3", LEADER_RATE)].prior, rates[("3", LEADER_RATE)].inherited) == ("9000000", None)
    assert sum("1.0 MB/s (cluster default), lower than ours (2.0 MB/s); kept" in n for n in notes) == 4
    # 40 MB/s default, higher: a per-broker value of ours, prior "not set" (restore deletes it).
    assert sorted(n for (n, k) in rates if k == FOLLOWER_RATE) == ["1", "2", "4", "5"]
    one = rates[("1", FOLLOWER_RATE)]
    assert (one.prior, one.value, one.inherited) == (None, "2000000", Inherited("40000000"))
    assert one.describe() == ("SET    broker 1: follower.replication.throttled.rate = '2000000' "
                              "(was (not set), cluster default '40000000' in force)")
    assert any("broker 3: follower.replication.throttled.rate is already 500.0 KB/s, lower" in n for n in notes)
    # Applied, then merged again: nothing more; restored: our overrides deleted, the default left to Kafka.
    during = apply(current, changes)
    assert throttle_changes(spec, during, inherited=default) == []
    undo = restore_changes(changes, during)
    assert {(c.name, c.key): c.value for c in undo if c.resource_type == "broker" and c.name != "3"} == {
        (b, FOLLOWER_RATE): None for b in ("1", "2", "4", "5")}
    # An equal default needs no override either, and says nothing.
    notes = []
    equal = throttle_changes(ThrottleSpec.for_moves(STEPS[:2], 1_000_000), {}, notes, default)
    assert not [c for c in equal if c.key == LEADER_RATE] and not any("kept" in n for n in notes)


def test_a_lower_static_config_is_theirs_and_effective_configs_fill_in_inherited_values():
    spec = ThrottleSpec(rate=2_000_000, rate_brokers={1})
    static = {("broker", "1"): {LEADER_RATE: Inherited("700000", STATIC_CONFIG)}}
    notes: list[str] = []
    changes = throttle_changes(spec, {}, notes, static)
    assert [c.key for c in changes] == [FOLLOWER_RATE]
    assert "(static broker config), lower than ours" in notes[0]
    current = {("broker", "1"): {LEADER_RATE: None, FOLLOWER_RATE: "3"}}
    both = {("broker", "1"): {LEADER_RATE: Inherited("7"), FOLLOWER_RATE: Inherited("9")},
            ("broker", "2"): {LEADER_RATE: Inherited("8")}}
    assert effective_configs(current, both) == {("broker", "1"): {LEADER_RATE: "7", FOLLOWER_RATE: "3"},
                                                ("broker", "2"): {LEADER_RATE: "8"}}
    assert current == {("broker", "1"): {LEADER_RATE: None, FOLLOWER_RATE: "3"}}, "inputs untouched"


def test_restore_puts_back_exactly_and_deletes_what_we_added():
    spec = ThrottleSpec.for_moves(STEPS[:2], 1_000_000)
    before = {("topic", "orders"): {LEADER_REPLICAS: "0:7"}, ("broker", "1"): {FOLLOWER_RATE: "9000000"}}
    changes = throttle_changes(spec, before)
    during = apply(before, changes)
    undo = restore_changes(changes, during)
    after = apply(during, undo)
    norm = lambda cfg: {k: {kk: vv for kk, vv in v.items() if vv is not None} for k, v in cfg.items() if v}  # noqa: E731
    assert norm(after) == norm(before)
    assert restore_changes(changes, after) == [], "restoring twice is a no-op"


def test_restore_when_someone_changed_values_during_the_run():
    changes = [ConfigChange("topic", "orders", LEADER_REPLICAS, "0:7", "0:7,3:1"),
               ConfigChange("broker", "1", LEADER_RATE, None, "1000000")]
    during = {("topic", "orders"): {LEADER_REPLICAS: "0:7,3:1,9:9"}, ("broker", "1"): {LEADER_RATE: "2000000"}}
    warnings: list[str] = []
    undo = restore_changes(changes, during, warnings)
    by = {(c.resource_type, c.name, c.key): c for c in undo}
    assert by[("topic", "orders", LEADER_REPLICAS)].value == "0:7,9:9"     # their entry kept, ours removed
    assert ("broker", "1", LEADER_RATE) not in by                           # their rate is theirs: kept
    assert len(warnings) == 2
    assert any("broker 1 leader.replication.throttled.rate is '2000000'" in w and "kept theirs" in w
               for w in warnings)
    assert any("9:9" in w and "kept" in w for w in warnings)
    assert leftovers(changes, apply(during, undo)) == []


def test_restore_walks_back_writes_newest_first():
    # Ours, then someone raised it to 5 MB/s, then the guard put ours back: theirs comes back.
    changes = [ConfigChange("broker", "1", LEADER_RATE, "9000000", "1000000"),
               ConfigChange("broker", "1", LEADER_RATE, "5000000", "1000000")]
    undo = restore_changes(changes, {("broker", "1"): {LEADER_RATE: "1000000"}})
    assert [(c.prior, c.value) for c in undo] == [("1000000", "5000000")]
    # Untouched: the value before the run comes back exactly.
    assert [(c.value) for c in restore_changes(changes[:1], {("broker", "1"): {LEADER_RATE: "1000000"}})] \
        == ["9000000"]
    # Somebody deleted ours and set nothing: nothing to write, and it says so.
    warnings: list[str] = []
    assert restore_changes(changes[:1], {("broker", "1"): {}}, warnings) == [] and warnings


def test_restore_list_keeps_wildcard_someone_set_and_leftovers_ignore_theirs():
    changes = [ConfigChange("topic", "t", FOLLOWER_REPLICAS, None, "0:4")]
    warnings: list[str] = []
    assert restore_changes(changes, {("topic", "t"): {FOLLOWER_REPLICAS: "*"}}, warnings) == []
    assert "'*'" in warnings[0]
    now = {("topic", "t"): {FOLLOWER_REPLICAS: "0:4,1:5"}}
    assert [c.value for c in leftovers(changes, now)] == ["1:5"]
    assert leftovers(changes, {("topic", "t"): {FOLLOWER_REPLICAS: "1:5"}}) == []


def test_parse_replica_list_formats():
    assert parse_replica_list(" 0:1, 2:3 ") == {(0, 1), (2, 3)}
    assert parse_replica_list("0-1") == {(0, 1)}
    assert parse_replica_list("*") == "*"
    assert parse_replica_list(None) == set()


def test_a_formatted_list_reads_back_as_its_entries_without_a_parse():
    from kafka_reassign.throttle import specs
    entries = [(3, 7), (0, 2), (0, 1), (3, 7)]
    value = specs.format_replica_list(entries)
    assert value == "0:1,0:2,3:7"
    read = specs.replica_set(value)
    assert read == specs._parsed_list.__wrapped__(value) == frozenset(entries)
    assert read is specs._FORMATTED[value]  # known from the write, not parsed again
    assert specs.replica_set(" 0:1, 0:2,3:7") == read  # another spelling is parsed
    assert specs.replica_set("*") == "*" and specs.replica_set(None) == frozenset()


def test_config_change_json_and_describe():
    c = ConfigChange("broker", "1", LEADER_RATE, None, "100")
    assert ConfigChange.from_json(c.to_json()) == c
    assert c.describe() == "SET    broker 1: leader.replication.throttled.rate = '100' (was (not set))"
    assert ConfigChange("broker", "1", LEADER_RATE, "100", None).describe().startswith("DELETE")
    over = ConfigChange("broker", "1", LEADER_RATE, None, "100", inherited=Inherited("900"))
    back = ConfigChange.from_json(over.to_json())
    assert back == over == c and back.inherited == Inherited("900"), "the default seen is kept, not compared"
    assert "inherited" not in c.to_json(), "records without one stay as they were"



def test_wanted_entries_per_topic_asked():
    from kafka_reassign.throttle.replica_lists import step_entries, wanted_entries
    steps = [StepMove("a", 0, (1, 2), (1, 3)), StepMove("a", 1, (2, 3), (2, 4)), StepMove("b", 0, (1, 2), (3, 2)),
             StepMove("a", 2, (1, 2), (2, 1))]  # a reorder copies nothing: no entries
    want = wanted_entries(steps, {"a", "c"})
    assert want == {("a", LEADER_REPLICAS): {(0, 1), (0, 2), (1, 2), (1, 3)},
                    ("a", FOLLOWER_REPLICAS): {(0, 3), (1, 4)},
                    ("c", LEADER_REPLICAS): set(), ("c", FOLLOWER_REPLICAS): set()}
    assert step_entries(steps[2]) == ({(0, 1), (0, 2)}, {(0, 3)})
