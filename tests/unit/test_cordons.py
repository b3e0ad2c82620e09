"""Cordons (KIP-1066): the config value, the snapshot, the planner, plan validation, the recorded
cordon/uncordon (on the simulated Kafka 4.3 cluster) and the CLI's parsing. The real Kafka 4.3.1 behaviour is in
tests/real_kafka/test_real_cordons.py."""
from __future__ import annotations

import copy
import pytest

from kafka_reassign.cli.parser import build_parser
from cordon_sim import D1, D2, CordonCluster, cordon_snapshot
from kafka_reassign.cluster.config_source import STATIC_CONFIG, Inherited
from kafka_reassign.cluster.cordons import CORDON_ALL, cordon_support, cordon_value, cordoned_dirs
from kafka_reassign.cluster.snapshot import validate_snapshot
from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.errors import PlanValidationError, SnapshotError
from kafka_reassign.planning.plan_checks import validate_plan
from kafka_reassign.planning.spark import plan
from kafka_reassign.planning.spark.cluster import Cluster
from kafka_reassign.planning.spark.constraints import check_constraints
from kafka_reassign.planning.spark.options import make_options
from kafka_reassign.throttle.cordon import (CordonError, cordon_brokers, cordon_record_id, release_run_cordons,
                                             uncordon_brokers)
from kafka_reassign.throttle.record import MemoryRecordStore
from kafka_sim.generate import GenerateOptions, generate_snapshot


# -- the config value ------------------------------------------------------------------------
def test_value_parsing_and_the_value_a_cordon_writes():
    assert cordoned_dirs("*", [D1, D2]) == {D1, D2}
    assert cordoned_dirs(f" {D1} ,", [D1, D2]) == {D1}
    assert cordoned_dirs(None, [D1]) == cordoned_dirs("", [D1]) == frozenset()
    assert cordon_value(None, [D1, D2], None) == CORDON_ALL
    assert cordon_value(None, [D1, D2], [D2]) == D2
    assert cordon_value(D1, [D1, D2], [D2]) == CORDON_ALL  # every dir ends up cordoned
    assert cordon_value("/x,/y", ["/x", "/y", "/z"], ["/x"]) == "/x,/y"


# -- the snapshot ----------------------------------------------------------------------------
def snapshot_with_cordons(cordoned_broker: int = 4, cordoned_dir: tuple[int, str] = (5, D1)) -> dict:
    snap = generate_snapshot(GenerateOptions(brokers=9, racks=3, topics=8, partitions=12, seed=3, log_dirs=2))
    for b in snap["brokers"]:
        for d in b["log_dirs"]:
            if b["id"] == cordoned_broker or (b["id"], d["path"]) == cordoned_dir:
                d["cordoned"] = True
    return snap


def test_snapshot_records_cordons_and_rejects_a_bad_flag():
    snap = snapshot_with_cordons()
    state = ClusterState.from_snapshot(snap)
    assert state.brokers[4].cordoned and state.brokers[4].cordoned_dirs == {D1, D2}
    assert not state.brokers[5].cordoned and state.brokers[5].cordoned_dirs == {D1}
    assert not state.brokers[1].cordoned
    bad = copy.deepcopy(snap)
    bad["brokers"][0]["log_dirs"][0]["cordoned"] = "yes"
    with pytest.raises(SnapshotError) as err:
        validate_snapshot(bad, planning=True)
    assert err.value.kinds == {"bad_cordoned"} and "log_dirs[0].cordoned" in str(err.value)


# -- the planner -----------------------------------------------------------------------------
def new_placements(before: dict, doc: dict) -> list[tuple[int, str]]:
    """(broker, log dir or 'any') of every replica a plan adds."""
    old = {(t["name"], p["partition"]): p["replicas"] for t in before["topics"] for p in t["partitions"]}
    out = []
    for e in doc["partitions"]:
        dirs = e.get("log_dirs") or ["any"] * len(e["replicas"])
        out += [(b, d) for b, d in zip(e["replicas"], dirs) if b not in old[(e["topic"], e["partition"])]]
    return out


@pytest.mark.parametrize("goal,options", [("remove-brokers", {"brokers": [8]}), ("rebalance", {})])
def test_planner_places_nothing_new_on_a_cordoned_broker_or_dir(goal, options):
    snap = snapshot_with_cordons()
    res = plan(snap, goal, engine="local", **options)
    added = new_placements(snap, res.plan.to_json())
    assert added, "the goal should move something"
    assert not [a for a in added if a[0] == 4], "replicas placed on fully cordoned broker 4"
    assert (5, D1) not in added
    if goal == "remove-brokers":
        assert all(b != 8 for b, _ in added)


def test_disks_goal_moves_nothing_into_a_cordoned_dir():
    snap = snapshot_with_cordons(cordoned_broker=-1, cordoned_dir=(1, D2))
    for t in snap["topics"]:  # broker 1 and 2 hold everything on their first disk
        for p in t["partitions"]:
            p["log_dirs"] = [D1 if b in (1, 2) else d for b, d in zip(p["replicas"], p["log_dirs"])]
    res = plan(snap, "disks", engine="local")
    moved_into = {(b, d) for e in res.plan.to_json()["partitions"]
                  for b, d in zip(e["replicas"], e["log_dirs"]) if d != "any"}
    assert (2, D2) in moved_into  # broker 2 is balanced between its disks...
    assert (1, D2) not in moved_into  # ...broker 1's second disk is cordoned


def test_constraint_check_flags_a_replica_placed_on_a_cordon():
    cluster = Cluster.from_snapshot(snapshot_with_cordons())
    p = next(x for x in cluster.partitions if 4 not in x.replicas and 5 not in x.replicas)
    final = [(x.replicas, x.log_dirs) for x in cluster.partitions]
    final[p.index] = ((4, *p.replicas[1:]), (D2, *p.log_dirs[1:]))
    problems = [x for x in check_constraints(cluster, final, make_options("rebalance")) if x.kind == "cordoned"]
    assert len(problems) == 1 and "broker 4 (all its log dirs cordoned)" in problems[0].reason
    final[p.index] = ((5, *p.replicas[1:]), (D1, *p.log_dirs[1:]))
    problems = [x for x in check_constraints(cluster, final, make_options("rebalance")) if x.kind == "cordoned"]
    assert len(problems) == 1 and f"cordoned log dir {D1} of broker 5" in problems[0].reason
    final[p.index] = ((5, *p.replicas[1:]), (D2, *p.log_dirs[1:]))  # its other dir is open
    assert not [x for x in check_constraints(cluster, final, make_options("rebalance")) if x.kind == "cordoned"]


# -- plan validation -------------------------------------------------------------------------
def test_validation_refuses_a_user_plan_onto_a_cordon_and_names_it():
    snap = snapshot_with_cordons()
    state = ClusterState.from_snapshot(snap)
    p = next(x for x in state.partitions() if not {4, 5} & set(x.replicas))
    onto_broker = {"topic": p.topic, "partition": p.partition, "replicas": [4, *p.replicas[1:]]}
    onto_dir = {"topic": p.topic, "partition": p.partition, "replicas": [5, *p.replicas[1:]],
                "log_dirs": [D1] + ["any"] * (len(p.replicas) - 1)}
    for entry, kind, words in ((onto_broker, "cordoned_broker", "broker 4 is cordoned"),
                               (onto_dir, "cordoned_log_dir", f"log dir '{D1}' of broker 5 is cordoned")):
        with pytest.raises(PlanValidationError) as err:
            validate_plan({"version": 1, "partitions": [entry]}, state)
        assert err.value.kinds == {kind} and words in str(err.value)
    # the other dir of broker 5, or Kafka's choice ("any"), is fine; so is a replica staying on broker 4
    ok_dir = dict(onto_dir, log_dirs=[D2] + ["any"] * (len(p.replicas) - 1))
    validate_plan({"version": 1, "partitions": [ok_dir]}, state)
    on4 = next(x for x in state.partitions() if x.replicas[0] == 4)
    keep4 = {"topic": on4.topic, "partition": on4.partition, "replicas": [on4.replicas[1], on4.replicas[0],
                                                                          *on4.replicas[2:]]}
    validate_plan({"version": 1, "partitions": [keep4]}, state)


# -- recorded cordon and uncordon, on the simulated Kafka 4.3 cluster ---------------------------
@pytest.fixture
def kafka(sim_cluster):
    """Factory: a CordonCluster (closed after the test)."""
    opened: list[CordonCluster] = []

    def start(snapshot: dict | None = None, **kwargs) -> CordonCluster:
        opened.append(CordonCluster(sim_cluster, snapshot or cordon_snapshot(), **kwargs))
        return opened[-1]

    yield start
    for c in opened:
        c.close()


def test_cordon_records_the_prior_value_before_writing_and_uncordon_puts_it_back(kafka):
    k = kafka(cordon_snapshot(static={2: D2}), own={1: D1})
    store = MemoryRecordStore()
    done = cordon_brokers(k.admin, store, k.admin.cluster_state(), [1, 2], by="test")
    assert k.validated == 2 and k.writes == 2 and k.own(1, 2) == {1: CORDON_ALL, 2: CORDON_ALL}
    assert done.not_read_back == {}
    rec1, rec2 = store.get(cordon_record_id(1)), store.get(cordon_record_id(2))
    assert rec1 and rec2 and [(c.prior, c.value) for c in rec1.changes] == [(D1, CORDON_ALL)]
    assert rec2.changes[0].prior is None and rec2.changes[0].inherited == Inherited(D2, STATIC_CONFIG)
    assert "static broker config" in done.lines()[1]
    # the brokers say so too: DescribeLogDirs v5 reports both dirs of each cordoned
    state = k.admin.cluster_state()
    assert state.brokers[1].cordoned and state.brokers[2].cordoned and not state.brokers[3].cordoned_dirs
    assert store.list_unrestored() == []  # held: the reconciler and `restore` leave cordons alone
    again = cordon_brokers(k.admin, store, state, [1], by="test")
    assert again.unchanged == [1] and not again.changes and k.writes == 2
    results = uncordon_brokers(k.admin, store, [1, 2])
    assert all(r.done for r in results.values())
    # the shared restore path names what it put back: a cordon, not a throttle
    assert results["cordon-broker-1"].message() == "cordon-broker-1: cordon restored (1 config write(s))"
    assert k.own(1, 2) == {1: D1, 2: None}  # exactly as before: broker 2 inherits its static value again
    assert k.admin.cluster_state().brokers[2].cordoned_dirs == {D2}
    with pytest.raises(CordonError) as err:
        uncordon_brokers(k.admin, store, [1])
    assert err.value.kinds == {"no_cordon_record"}


def test_cordon_of_some_dirs_then_all_keeps_the_first_prior(kafka):
    k = kafka()
    store = MemoryRecordStore()
    cordon_brokers(k.admin, store, k.admin.cluster_state(), [3], [D1], by="test")
    assert k.own(3) == {3: D1}
    cordon_brokers(k.admin, store, k.admin.cluster_state(), [3], by="test")
    assert k.own(3) == {3: CORDON_ALL}
    uncordon_brokers(k.admin, store, [3])
    assert k.own(3) == {3: None}


def test_a_failed_run_undoes_only_its_own_cordon_and_uncordon_undoes_both(kafka):
    k = kafka()
    store = MemoryRecordStore()
    cordon_brokers(k.admin, store, k.admin.cluster_state(), [4], [D1], by="operator")
    cordon_brokers(k.admin, store, k.admin.cluster_state(), [4], by="run r1", run_id="r1")
    assert k.own(4) == {4: CORDON_ALL} and store.get(cordon_record_id(4, "r1")) is not None
    assert release_run_cordons(k.admin, store, "other-run") == {}
    undone = release_run_cordons(k.admin, store, "r1")
    assert list(undone) == ["cordon-broker-4@r1"] and k.own(4) == {4: D1}  # the operator's cordon stays
    cordon_brokers(k.admin, store, k.admin.cluster_state(), [4], by="run r2", run_id="r2")
    # r2 succeeded: the broker stays cordoned until the operator uncordons it, to the value before both
    undone = uncordon_brokers(k.admin, store, [4])
    assert list(undone) == ["cordon-broker-4@r2", "cordon-broker-4"]
    assert k.own(4) == {4: None}


@pytest.mark.parametrize("kwargs,kind,words", [
    ({"brokers": [5]}, "sole_isr", "only in-sync replicas of 1 partition(s)"),
    ({"brokers": [42]}, "unknown_broker", "broker 42 is unknown"),
    ({"brokers": [1], "log_dirs": ["/nope"]}, "unknown_log_dir", "['/nope'] are not log dirs of broker 1"),
])
def test_bad_cordons_are_refused_before_any_write(kafka, kwargs, kind, words):
    k = kafka(cordon_snapshot(sole_isr_on=5))
    store = MemoryRecordStore()
    state = k.admin.cluster_state()
    with pytest.raises(CordonError) as err:
        cordon_brokers(k.admin, store, state, kwargs["brokers"], kwargs.get("log_dirs"), by="test")
    assert err.value.kinds == {kind} and words in str(err.value) and "nothing was written" in str(err.value)
    if kind == "sole_isr":
        sole = next(p for p in state.partitions() if p.isr == (5,))
        assert f"{sole.topic}-{sole.partition}" in str(err.value)
    assert k.writes == 0 and k.validated == 0 and store.list_all() == []
    # a cordon stops new placements only: with the override, broker 5 is cordoned all the same
    if kind == "sole_isr":
        cordon_brokers(k.admin, store, state, [5], by="test", allow_sole_isr=True)
        assert k.own(5) == {5: CORDON_ALL}


def test_an_older_cluster_is_refused_with_the_one_line_note(kafka):
    k = kafka(cordons=False)  # a Kafka 4.1 cluster: DescribeLogDirs v4
    assert cordon_support(k.admin).supported is False
    with pytest.raises(CordonError) as err:
        cordon_brokers(k.admin, MemoryRecordStore(), k.admin.cluster_state(), [1], by="test")
    assert err.value.kinds == {"cordon_unsupported"} and "Kafka 4.3+" in str(err.value)
    assert k.writes == 0 and k.validated == 0


def test_the_simulated_controller_places_no_new_replica_on_a_cordon(kafka):
    """As Kafka 4.3 (tests/real_kafka/test_real_cordons.py): no new replica on a fully cordoned broker,
    none in a cordoned dir, no move into one, and too few uncordoned brokers refuses the topic."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidReplicationFactorError
    k = kafka(cordon_snapshot(brokers=4))
    store = MemoryRecordStore()
    cordon_brokers(k.admin, store, k.admin.cluster_state(), [4], by="test")
    cordon_brokers(k.admin, store, k.admin.cluster_state(), [3], [D1], by="test")
    client = KafkaAdminClient(bootstrap_servers=k.cluster.bootstrap_servers, client_id="cordon-test")
    try:
        client.create_topics([NewTopic("fresh", num_partitions=12, replication_factor=3)])
        fresh = [p for p in k.admin.cluster_state().partitions() if p.topic == "fresh"]
        assert len(fresh) == 12 and all(4 not in p.replicas and 3 in p.replicas for p in fresh)
        assert {k.cluster.model.partition_state("fresh", p.partition)["log_dirs"][3]
                for p in fresh} == {D2}
        on3 = next(p for p in k.admin.cluster_state().partitions() if p.topic != "fresh" and 3 in p.replicas)
        assert k.admin.alter_replica_log_dirs({(on3.topic, on3.partition, 3): D1}) == {
            (on3.topic, on3.partition, 3): "INVALID_REPLICATION_ASSIGNMENT"}  # kafka-python's name of 39
        with pytest.raises(InvalidReplicationFactorError):
            client.create_topics([NewTopic("too-wide", num_partitions=1, replication_factor=4)])
    finally:
        client.close()


# -- the CLI ---------------------------------------------------------------------------------
def test_cli_parses_cordon_and_uncordon():
    args = build_parser().parse_args(["cordon", "--bootstrap-server", "k:9092", "--brokers", "1,2",
                                      "--log-dirs", f"{D1}, {D2}", "--record-dir", "/r"])
    assert (args.command, args.brokers, args.log_dirs, args.allow_sole_isr, args.record_dir) == (
        "cordon", [1, 2], [D1, D2], False, "/r")
    args = build_parser().parse_args(["uncordon", "--bootstrap-server", "k:9092", "--brokers", "3"])
    assert (args.command, args.brokers) == ("uncordon", [3])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["cordon", "--bootstrap-server", "k:9092", "--brokers", "one"])
