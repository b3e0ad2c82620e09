"""ClusterModel configs (validation, sources, synonyms), topics, writes counter, snapshot."""
from __future__ import annotations

import pytest

from kafka_sim import errors as E
from kafka_sim.config_types import ConfigSource as S

from test_sim_model_helpers import GB, MB, manual, snapshot, topic

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LONG_MAX = "9223372036854775807"


def entries(m, rtype, name, keys=None):
    code, msg, es = m.describe_configs(rtype, name, keys)
    assert code == E.NONE, msg
    return {e.name: e for e in es}


@pytest.fixture
def m():
    return manual(snapshot(topics=[topic("t", [[1, 2, 3], [2, 3, 4]], size=GB)],
                           broker_configs={1: {"replica.lag.time.max.ms": "10000"}}))


@pytest.mark.parametrize("value,ok", [("0", True), ("1048576", True), (" 100 ", True), (LONG_MAX, True),
                                      ("-1", False), ("abc", False), ("1.5", False), ("9223372036854775808", False)])
def test_rates_must_be_non_negative_longs(m, value, ok):
    code, msg = m.incremental_alter_configs(4, "1", [("leader.replication.throttled.rate", SET, value)])
    if ok:
        assert code == E.NONE
        assert m.broker_configs(1)["leader.replication.throttled.rate"] == value.strip()
    else:
        # ConfigAdminManager.validateBrokerConfigChange turns a bad broker value into
        # InvalidRequestException (KAFKA-13609): INVALID_REQUEST, not INVALID_CONFIG
        assert code == E.INVALID_REQUEST and "leader.replication.throttled.rate" in msg
        assert m.broker_configs(1) == {}


@pytest.mark.parametrize("value,stored", [("*", "*"), ("0:1,1:2", "0:1,1:2"), (" 0:1 , 1:2 ", "0:1,1:2"),
                                          ("", ""), ("0:1,", "0:1,")])
def test_throttled_replica_lists_accepted(m, value, stored):
    assert m.incremental_alter_configs(2, "t", [("leader.replication.throttled.replicas", SET, value)]) == (
        E.NONE, None)
    assert m.topic_configs("t")["leader.replication.throttled.replicas"] == stored


@pytest.mark.parametrize("value", ["0-1", "a:b", "*,0:1", "0:1,,1:2", "0:1:2", "1"])
def test_throttled_replica_lists_rejected(m, value):
    code, msg = m.incremental_alter_configs(2, "t", [("follower.replication.throttled.replicas", SET, value)])
    assert code == E.INVALID_CONFIG
    assert "must be the literal '*' or a list of replicas" in msg
    assert m.topic_configs("t") == {}


def test_unknown_and_read_only_config_names(m):
    code, msg = m.incremental_alter_configs(2, "t", [("retention.msec", SET, "1")])
    assert (code, msg) == (E.INVALID_CONFIG, "Unknown topic config name: retention.msec")
    # APPEND to a name Kafka does not know (prepareIncrementalConfigs): INVALID_CONFIG
    assert m.incremental_alter_configs(4, "1", [("leader.replication.throttle.rate", APPEND, "1")])[0] == \
        E.INVALID_CONFIG
    code, msg = m.incremental_alter_configs(4, "1", [("replica.lag.time.max.ms", SET, "1000")])
    assert code == E.INVALID_REQUEST and "Cannot update these configs dynamically" in msg
    assert m.incremental_alter_configs(4, "x", [("leader.replication.throttled.rate", SET, "1")])[0] == \
        E.INVALID_REQUEST
    assert m.incremental_alter_configs(2, "nope", [("retention.ms", SET, "1")])[0] == \
        E.UNKNOWN_TOPIC_OR_PARTITION
    assert m.incremental_alter_configs(2, "t", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]
                                       )[0] == E.INVALID_REQUEST
    assert m.incremental_alter_configs(2, "t", [("min.insync.replicas", SET, "0")])[0] == E.INVALID_CONFIG
    assert m.incremental_alter_configs(2, "t", [("cleanup.policy", SET, "delete,shred")])[0] == E.INVALID_CONFIG
    assert m.write_count == 0


def test_unknown_broker_config_is_stored_and_described(m):
    # DynamicBrokerConfig.validateConfigs checks only names it knows; the KRaft controller
    # (ControllerConfigurationValidator) validates only the broker id: a misspelt name is stored
    assert m.incremental_alter_configs(4, "1", [("leader.replication.throttle.rate", SET, "1")]) == (E.NONE, None)
    assert m.broker_configs(1) == {"leader.replication.throttle.rate": "1"}
    e = entries(m, 4, "1")["leader.replication.throttle.rate"]
    assert (e.value, e.source, e.read_only) == ("1", S.DYNAMIC_BROKER_CONFIG, True)
    assert m._rates[1][0] == float("inf")  # and it throttles nothing


def test_append_and_subtract_on_list_configs(m):
    key = "leader.replication.throttled.replicas"
    assert m.incremental_alter_configs(2, "t", [(key, APPEND, "0:1,0:2")]) == (E.NONE, None)
    assert m.incremental_alter_configs(2, "t", [(key, APPEND, "0:2,1:3")]) == (E.NONE, None)
    assert m.topic_configs("t")[key] == "0:1,0:2,1:3"
    assert m.incremental_alter_configs(2, "t", [(key, SUBTRACT, "0:1")]) == (E.NONE, None)
    assert m.topic_configs("t")[key] == "0:2,1:3"
    code, msg = m.incremental_alter_configs(2, "t", [("retention.ms", APPEND, "5")])
    assert code == E.INVALID_CONFIG and "append is not allowed" in msg
    assert m.incremental_alter_configs(2, "t", [("cleanup.policy", APPEND, "compact")]) == (E.NONE, None)
    assert m.topic_configs("t")["cleanup.policy"] == "delete,compact"  # appended to the default


def test_validate_only_and_writes_counter(m):
    ops = [("leader.replication.throttled.rate", SET, "1000")]
    assert m.incremental_alter_configs(4, "1", ops, validate_only=True) == (E.NONE, None)
    assert m.create_topic("new", 3, 2, None, {}, validate_only=True) == (E.NONE, None)
    assert m.create_partitions("t", 4, None, validate_only=True) == (E.NONE, None)
    assert m.alter_configs(2, "t", {"retention.ms": "1000"}, validate_only=True) == (E.NONE, None)
    assert m.write_count == 0 and "new" not in m.topics and len(m.topics["t"].partitions) == 2
    assert m.broker_configs(1) == {} and m.topic_configs("t") == {}
    m.incremental_alter_configs(4, "1", ops)
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    m.alter_replica_log_dirs(2, [("/d2", "t", 0)])
    m.create_topic("new", 3, 2, None, {}, False)
    m.delete_topic("new")
    assert m.writes == {"IncrementalAlterConfigs": 1, "AlterPartitionReassignments": 1,
                        "AlterReplicaLogDirs": 1, "CreateTopics": 1, "DeleteTopics": 1}
    assert m.write_count == 5


def test_legacy_alter_configs_replaces_everything(m):
    m.incremental_alter_configs(2, "t", [("retention.ms", SET, "1000"), ("segment.bytes", SET, "1048576")])
    assert m.alter_configs(2, "t", {"min.insync.replicas": "2"}) == (E.NONE, None)
    assert m.topic_configs("t") == {"min.insync.replicas": "2"}
    assert m.alter_configs(4, "", {"leader.replication.throttled.rate": "-5"})[0] == E.INVALID_REQUEST


def test_topic_config_sources_defaults_and_synonyms(m):
    es = entries(m, 2, "t")
    assert es["retention.ms"].value == "604800000" and es["retention.ms"].source == S.DEFAULT_CONFIG
    assert es["leader.replication.throttled.replicas"].value == "" and \
        es["leader.replication.throttled.replicas"].synonyms == []
    mir = es["min.insync.replicas"]
    assert (mir.value, mir.source, mir.read_only) == ("1", S.DEFAULT_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in mir.synonyms] == [("min.insync.replicas", "1", S.DEFAULT_CONFIG)]
    # a cluster-wide dynamic default shows through the topic, marked as such
    m.incremental_alter_configs(4, "", [("min.insync.replicas", SET, "2"), ("log.retention.hours", SET, "1")])
    es = entries(m, 2, "t", ["min.insync.replicas", "retention.ms"])
    assert set(es) == {"min.insync.replicas", "retention.ms"}
    mir = es["min.insync.replicas"]
    assert (mir.value, mir.source) == ("2", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [s.source for s in mir.synonyms] == [S.DYNAMIC_DEFAULT_BROKER_CONFIG, S.DEFAULT_CONFIG]
    assert es["retention.ms"].value == "3600000"  # hours converted to ms
    assert m.min_insync_replicas("t") == 2
    # a topic override comes first
    m.incremental_alter_configs(2, "t", [("min.insync.replicas", SET, "3")])
    mir = entries(m, 2, "t")["min.insync.replicas"]
    assert (mir.value, mir.source) == ("3", S.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.source) for s in mir.synonyms] == [
        ("min.insync.replicas", S.DYNAMIC_TOPIC_CONFIG), ("min.insync.replicas", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("min.insync.replicas", S.DEFAULT_CONFIG)]
    assert m.describe_configs(2, "nope", None)[0] == E.UNKNOWN_TOPIC_OR_PARTITION


def test_broker_config_sources(m):
    es = entries(m, 4, "1")
    # the throttle rates are DynamicConfig.Broker quota configs, not KafkaConfig definitions:
    # DescribeConfigs (ConfigHelper, KafkaConfig originals + values) lists them only when set
    assert "leader.replication.throttled.rate" not in es and "follower.replication.throttled.rate" not in es
    lag = es["replica.lag.time.max.ms"]
    assert (lag.value, lag.source, lag.read_only) == ("10000", S.STATIC_BROKER_CONFIG, True)
    assert [s.source for s in lag.synonyms] == [S.STATIC_BROKER_CONFIG, S.DEFAULT_CONFIG]
    assert es["broker.rack"].value == "r0" and es["broker.id"].value == "1"
    assert entries(m, 4, "2")["replica.lag.time.max.ms"].source == S.DEFAULT_CONFIG
    m.incremental_alter_configs(4, "", [("leader.replication.throttled.rate", SET, "500")])
    m.incremental_alter_configs(4, "1", [("leader.replication.throttled.rate", SET, "100")])
    rate = entries(m, 4, "1")["leader.replication.throttled.rate"]
    assert (rate.value, rate.source) == ("100", S.DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in rate.synonyms] == [
        ("100", S.DYNAMIC_BROKER_CONFIG), ("500", S.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    rate2 = entries(m, 4, "2")["leader.replication.throttled.rate"]
    assert (rate2.value, rate2.source) == ("500", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    # the cluster-default resource lists only what is set there
    default = entries(m, 4, "")
    assert list(default) == ["leader.replication.throttled.rate"]
    assert default["leader.replication.throttled.rate"].source == S.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert m.broker_configs("") == {"leader.replication.throttled.rate": "500"}
    # deleting the per-broker value falls back to the default; its rate is used by the physics
    m.incremental_alter_configs(4, "1", [("leader.replication.throttled.rate", DELETE, None)])
    assert entries(m, 4, "1")["leader.replication.throttled.rate"].value == "500"
    assert m.broker_configs(1) == {}
    assert m._rates[1][0] == 500.0
    assert m.describe_configs(4, "42", None)[0] == E.INVALID_REQUEST


def test_create_topic_rack_aware_and_errors(m):
    assert m.create_topic("spread", 12, 3, None, {"min.insync.replicas": "2"}, False) == (E.NONE, None)
    t = m.topics["spread"]
    racks = {b.id: b.rack for b in m.brokers.values()}
    leaders = []
    for p in t.partitions:
        assert len({racks[b] for b in p.replicas}) == 3  # one replica per rack
        assert p.isr == p.replicas and p.leader == p.replicas[0]
        leaders.append(p.leader)
    assert len(set(leaders)) == 6  # leaders spread over every broker
    assert m.topic_configs("spread") == {"min.insync.replicas": "2"}
    assert m.create_topic("spread", 1, 1, None, {}, False)[0] == E.TOPIC_ALREADY_EXISTS
    assert m.create_topic("x", 1, 7, None, {}, False)[0] == E.INVALID_REPLICATION_FACTOR
    assert m.create_topic("x", 0, 1, None, {}, False)[0] == E.INVALID_PARTITIONS
    assert m.create_topic("x", 1, 0, None, {}, False)[0] == E.INVALID_REPLICATION_FACTOR
    assert m.create_topic("x", 1, 1, None, {"bogus": "1"}, False)[0] == E.INVALID_CONFIG
    assert m.create_topic("x y", 1, 1, None, {}, False)[0] == E.INVALID_TOPIC_EXCEPTION
    assert m.create_topic("x", -1, -1, {0: [1, 1]}, {}, False)[0] == E.INVALID_REPLICA_ASSIGNMENT
    assert m.create_topic("x", -1, -1, {0: [1, 2], 1: [3]}, {}, False)[0] == E.INVALID_REPLICA_ASSIGNMENT
    assert m.create_topic("x", 2, -1, {0: [1, 2]}, {}, False)[0] == E.INVALID_REQUEST
    assert m.create_topic("x", -1, -1, {0: [1, 2], 1: [3, 4]}, {}, False) == (E.NONE, None)
    assert [p.replicas for p in m.topics["x"].partitions] == [[1, 2], [3, 4]]
    assert m.create_topic("d", -1, -1, None, {}, False) == (E.NONE, None)  # broker defaults: 1 x 1
    assert len(m.topics["d"].partitions) == 1 and len(m.topics["d"].partitions[0].replicas) == 1


def test_create_partitions_and_delete_topic(m):
    assert m.create_partitions("t", 2, None)[0] == E.INVALID_PARTITIONS
    assert m.create_partitions("t", 1, None)[0] == E.INVALID_PARTITIONS
    assert m.create_partitions("nope", 3, None)[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert m.create_partitions("t", 4, [[1, 2, 3]])[0] == E.INVALID_REPLICA_ASSIGNMENT
    assert m.create_partitions("t", 3, [[1, 2]])[0] == E.INVALID_REPLICA_ASSIGNMENT
    assert m.create_partitions("t", 5, [[4, 5, 6], [5, 6, 1], [6, 1, 2]]) == (E.NONE, None)
    assert [p.replicas for p in m.topics["t"].partitions[2:]] == [[4, 5, 6], [5, 6, 1], [6, 1, 2]]
    assert m.create_partitions("t", 8, None) == (E.NONE, None)
    assert all(len(p.replicas) == 3 for p in m.topics["t"].partitions)
    m.alter_reassignments([("t", 0, [4, 5, 6])])
    assert m.delete_topic("t") == (E.NONE, None)
    assert m.delete_topic("t")[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert m.list_reassignments() == [] and not m._active
    m.advance_by(100)
    for b in m.brokers:
        assert all(parts == [] for *_x, parts in m.describe_log_dirs(b))


def test_new_topic_on_stopped_broker_leaves_it_out_of_isr(m):
    m.stop_broker(6)
    assert m.create_topic("x", -1, -1, {0: [6, 1, 2]}, {}, False) == (E.NONE, None)
    p = m.topics["x"].partitions[0]
    assert p.leader == 1 and p.isr == [1, 2]
    m.start_broker(6)
    m.advance_by(0.1)
    assert p.isr == [1, 2, 6]


def test_snapshot_round_trip(m):
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    m.incremental_alter_configs(2, "t", [("retention.ms", SET, "1000")])
    m.advance_by(100)
    snap = m.snapshot()
    assert snap["version"] == 1 and len(snap["brokers"]) == 6
    (t,) = snap["topics"]
    assert t["configs"] == {"retention.ms": "1000"}
    p0 = t["partitions"][0]
    assert p0["replicas"] == [4, 2, 3] and p0["leader"] == 4 and p0["size_bytes"] == GB
    assert len(p0["log_dirs"]) == 3
    assert snap["brokers"][0]["configs"] == {"replica.lag.time.max.ms": "10000"}
    again = manual(snap)
    assert again.partition_state("t", 0)["replicas"] == [4, 2, 3]
    assert again.topic_configs("t") == {"retention.ms": "1000"}


def test_bad_snapshots_are_rejected():
    with pytest.raises(ValueError, match="unknown broker 9"):
        manual(snapshot(topics=[topic("t", [[1, 9]])]))
    with pytest.raises(ValueError, match="Unknown topic config name"):
        manual(snapshot(topics=[topic("t", [[1, 2]], configs={"nope": "1"})]))
    with pytest.raises(ValueError, match="no log dir"):
        snap = snapshot(topics=[topic("t", [[1, 2]])])
        snap["topics"][0]["partitions"][0]["log_dirs"] = ["/d1", "/zz"]
        manual(snap)
    with pytest.raises(ValueError, match="no brokers"):
        manual({"version": 1, "brokers": [], "topics": []})


LIST_VALUES = ["0:1", "0:1,1:2", "12:300,007:8", " 0:1", "0:1 ", "0:1\n", "0:1, 1:2", "0:1,", "0:1,,", "*", " * ",
               "", ",", "0:1,,1:2", "0-1", "a:b", "*,0:1", "0:1:2", "1", "0:", ":1", "\u0663:1", "0:1,*", "+1:2"]


def _reference_parse(value):
    """parse_throttled_replicas as it was before its one-match path (split, then a split per item)."""
    from kafka_sim.config_types import split_list
    if value is None:
        return None
    items = [i for i in split_list(value) if i]
    if items == ["*"]:
        return True
    return frozenset((int(a), int(b)) for a, b in (i.split(":") for i in items)) or None


@pytest.mark.parametrize("value", LIST_VALUES)
def test_replica_list_fast_paths_answer_as_the_full_parse(value):
    # A list of pairs is validated and parsed in one match: the same value, error and entries
    # as the split item by item.
    from kafka_sim.config_types import (ConfigValueError, format_value, normalize, parse_throttled_replicas,
                                        parse_value)
    from kafka_sim.configs import TOPIC_CONFIGS
    key = TOPIC_CONFIGS["leader.replication.throttled.replicas"]
    try:
        expected = format_value(key, parse_value(key, value))
    except ConfigValueError as exc:
        with pytest.raises(ConfigValueError) as got:
            normalize(key, value)
        assert str(got.value) == str(exc)
        return
    assert normalize(key, value) == expected
    assert parse_throttled_replicas(expected) == _reference_parse(expected)


def test_topic_described_by_name_as_in_the_full_description(m):
    # Only the names asked for are looked at: the same entries, in the same order, as those
    # names in the description of every config (unknown names give nothing, as in Kafka).
    m.incremental_alter_configs(2, "t", [("leader.replication.throttled.replicas", SET, "0:1"),
                                         ("retention.ms", SET, "1000")])
    full = m.describe_configs(2, "t", None)[2]
    asked = ["retention.ms", "no.such.config", "leader.replication.throttled.replicas", "cleanup.policy",
             "retention.ms"]
    code, _msg, got = m.describe_configs(2, "t", asked)
    assert code == E.NONE
    assert got == [e for e in full if e.name in asked]
    assert [e.name for e in got] == ["cleanup.policy", "leader.replication.throttled.replicas", "retention.ms"]


def test_topic_values_kept_validate_as_made_anew(monkeypatch):
    # A value validated before is not validated again: the same normalized value, a bad one
    # still refused with the same error, and a changed one validated (also once the kept ones
    # are all forgotten).
    from kafka_sim import config_resolution as cr
    from kafka_sim.config_types import ConfigValueError, normalize
    from kafka_sim.configs import TOPIC_CONFIGS
    monkeypatch.setattr(cr, "_NORMALIZED_MAX", 3)
    cr._NORMALIZED.clear()
    cases = [{"retention.ms": " 1000 ", "cleanup.policy": "compact, delete"}, {"retention.ms": "1000"},
             {"retention.ms": " 1000 ", "min.insync.replicas": "2"}, {"retention.ms": "-5"},
             {"min.insync.replicas": "x"}, {"min.insync.replicas": "2", "segment.bytes": "1048576"},
             {"retention.ms": "2000"}, {"min.insync.replicas": "x"}, {"retention.ms": " 1000 "}]
    for configs in cases * 2:
        try:
            expected = {n: normalize(TOPIC_CONFIGS[n], v) for n, v in configs.items()}
        except ConfigValueError as exc:
            with pytest.raises(ConfigValueError) as got:
                cr.validate_topic_configs(configs)
            assert str(got.value) == str(exc)
            continue
        assert cr.validate_topic_configs(configs) == expected
        assert len(cr._NORMALIZED) <= 3
