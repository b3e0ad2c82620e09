"""Plan and parameter validation against a cluster state (kafka_reassign.planning.validate)."""
from __future__ import annotations

import pytest

from kafka_reassign.errors import ParamError, PlanValidationError
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.planning.plan_checks import validate_plan, validated_plan
from kafka_reassign.planning.validate import ReassignParams, validate_params


def cluster(**over):
    snap = {"version": 1,
            "brokers": [{"id": i, "rack": "abc"[i % 3], "alive": i != 7,
                         "log_dirs": [{"path": "/d1", "capacity_bytes": 10**12},
                                      {"path": "/d2", "capacity_bytes": 10**12}]} for i in range(1, 8)],
            "topics": [
                {"name": "orders", "configs": {"min.insync.replicas": "2"},
                 "partitions": [{"partition": i, "replicas": [1, 2, 3], "leader": 1, "size_bytes": 1000,
                                 "log_dirs": ["/d1", "/d1", "/d1"]} for i in range(8)]},
                {"name": "__consumer_offsets", "internal": True, "configs": {},
                 "partitions": [{"partition": 0, "replicas": [1, 2, 3], "leader": 1}]},
                {"name": "dead", "configs": {}, "partitions": [
                    {"partition": 0, "replicas": [7], "leader": None, "isr": [], "offline": [7]}]},
            ],
            "in_flight": [{"topic": "orders", "partition": 3, "replicas": [4, 5, 6, 1, 2, 3],
                           "adding": [4, 5, 6], "removing": [1, 2, 3]}]}
    snap.update(over)
    return ClusterState.from_snapshot(snap)


def plan(*entries):
    return {"version": 1, "partitions": list(entries)}


def e(topic="orders", partition=0, replicas=(1, 2, 4), **kw):
    return {"topic": topic, "partition": partition, "replicas": list(replicas), **kw}


def test_valid_plan_passes_and_warns_on_partitions_already_at_target():
    warnings = validate_plan(plan(e(partition=0, replicas=[1, 2, 4]), e(partition=1, replicas=[1, 2, 3])),
                             cluster(), refuse_foreign_in_flight=False)
    assert any("already at its target" in w for w in warnings)


# (entry or whole plan, kind, message fragment)
CASES = [
    ([1, 2], "not_object", "must be a JSON object"),
    ("{oops", "not_json", "not valid JSON"),
    ({"version": 3, "partitions": [e()]}, "bad_version", "version: must be 1"),
    (plan(), "empty_plan", "the plan is empty"),
    (plan(e(), e()), "duplicate_entry", "partitions[1] (orders-0): duplicate entry"),
    (plan(e(topic="nope")), "unknown_topic", "partitions[0] (nope-0): unknown topic 'nope'"),
    (plan(e(partition=99)), "unknown_partition", "orders has 8 partitions (0..7)"),
    (plan(e(replicas=[])), "empty_replicas", "replicas is empty"),
    (plan(e(replicas=[1, 1, 4])), "duplicate_replicas", "broker 1 listed more than once"),
    (plan(e(replicas=[1, 2, 9])), "unknown_broker", "broker 9 does not exist (brokers: 1, 2, 3, 4, 5, 6, 7)"),
    (plan(e(replicas=[1, 2, 7])), "broker_not_alive", "broker 7 is not alive"),
    (plan(e(replicas=[1, 2, 4, 5])), "rf_change", "replication factor change 3 -> 4"),
    (plan(e(replicas=[1, 2, 4], log_dirs=["any"])), "log_dirs_length", "log_dirs has 1 entries but replicas has 3"),
    (plan(e(replicas=[1, 2, 4], log_dirs=["any", "/d9", "any"])), "unknown_log_dir",
     "log dir '/d9' is not a log dir of broker 2 (it has /d1, /d2)"),
    (plan(e(replicas=[1, -2, 4])), "bad_broker_id", "replicas[1] must be >= 0"),
    (plan(e(replicas=[1, "2", 4])), "bad_broker_id", "replicas[1] must be an integer broker id"),
    (plan(e(partition=3, replicas=[1, 2, 4])), "in_flight_foreign",
     "orders-3 is already being reassigned to [4,5,6] by someone else"),
    (plan(e(replicas=[4])), "below_min_isr", "would leave 1 replica(s), fewer than min.insync.replicas=2"),
    (plan(e(topic="dead", replicas=[1])), "partition_offline", "all replicas of dead-0 are offline"),
    (plan(e(partition=3, replicas=[4, 5, 6])), "in_flight_foreign",
     "orders-3 is already being reassigned to [4,5,6] by someone else (no record of this run"),
    (plan(e(partition=1, replicas=[1, 2, 4], original_replicas=[2, 1, 3])), "stale_plan",
     "stale plan: 1 partition(s) changed since the plan was made (plan's starting replicas -> live): "
     "orders-1 [2,1,3] -> now [1,2,3]"),
    (plan(e(topic="__consumer_offsets", replicas=[1, 2, 4])), "internal_topic",
     "__consumer_offsets is an internal topic"),
    (plan(e(partition=0, replicas=[1, 2, 4])), "foreign_in_flight_elsewhere",
     "orders-3 is being reassigned to [4,5,6] by someone else (not in this plan)"),
]


@pytest.mark.parametrize("raw, kind, fragment", CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)])
def test_each_kind_of_rejection_names_entry_and_reason(raw, kind, fragment):
    with pytest.raises(PlanValidationError) as info:
        validate_plan(raw, cluster(), refuse_foreign_in_flight=(kind == "foreign_in_flight_elsewhere"))
    assert kind in info.value.kinds, str(info.value)
    assert fragment in str(info.value)
    assert "nothing was written" in str(info.value)


def test_at_least_fifteen_kinds():
    assert len({c[1] for c in CASES}) >= 15


def test_all_problems_collected_in_one_error():
    raw = plan(e(topic="nope"), e(partition=99), e(replicas=[1, 2, 9]), e(partition=4, replicas=[1, 1, 4]),
               e(partition=5, replicas=[1, 2, 3, 4]))
    with pytest.raises(PlanValidationError) as info:
        validate_plan(raw, cluster())
    assert {"unknown_topic", "unknown_partition", "unknown_broker", "duplicate_replicas", "rf_change",
            "foreign_in_flight_elsewhere"} <= info.value.kinds
    assert len(info.value.problems) >= 6


def test_rf_change_and_internal_topics_allowed_when_asked():
    validate_plan(plan(e(replicas=[1, 2, 4, 5])), cluster(), allow_rf_change=True, refuse_foreign_in_flight=False)
    validate_plan(plan(e(topic="__consumer_offsets", replicas=[1, 2, 4])), cluster(), allow_internal_topics=True,
                  refuse_foreign_in_flight=False)


def test_in_flight_move_is_ours_only_when_a_record_says_we_submitted_it():
    # orders-3 is moving to [4,5,6]: the plan's own target, yet nobody of ours submitted it.
    with pytest.raises(PlanValidationError, match="by someone else"):
        validate_plan(plan(e(partition=3, replicas=[4, 5, 6])), cluster())
    # A record of ours lists that exact target: adopted (resume).
    validate_plan(plan(e(partition=3, replicas=[4, 5, 6])), cluster(), own_targets={("orders", 3): [(4, 5, 6)]})
    # A first KIP-435 step we recorded, for a plan whose final target is elsewhere.
    st = cluster(in_flight=[{"topic": "orders", "partition": 0, "replicas": [4, 1, 2, 3], "adding": [4],
                             "removing": [3]}])
    validate_plan(plan(e(partition=0, replicas=[4, 5, 6])), st, own_targets={("orders", 0): [(4, 1, 2)]})
    with pytest.raises(PlanValidationError, match="by someone else"):
        validate_plan(plan(e(partition=0, replicas=[4, 5, 6])), st, own_targets={("orders", 0): [(5, 1, 2)]})


def test_in_flight_move_of_an_earlier_run_of_ours_elsewhere_is_named_as_ours():
    with pytest.raises(PlanValidationError) as info:
        validate_plan(plan(e(partition=0, replicas=[1, 2, 4])), cluster(), own_targets={("orders", 3): [(4, 5, 6)]})
    assert "orders-3 is being reassigned to [4,5,6] by an earlier run of this project" in str(info.value)


def test_noop_plan_is_a_success_that_says_nothing_to_move():
    warnings = validate_plan(plan(e(partition=1, replicas=[1, 2, 3]), e(partition=2, replicas=[1, 2, 3])),
                             cluster(), refuse_foreign_in_flight=False)
    assert warnings[0].startswith("nothing to move: every partition of the plan is already at its target")


def test_drift_check_passes_for_unchanged_and_finished_partitions():
    # Unchanged since the plan was made, and already at target (a re-run): both fine.
    validate_plan(plan(e(partition=1, replicas=[1, 2, 4], original_replicas=[1, 2, 3]),
                       e(partition=2, replicas=[1, 2, 3], original_replicas=[3, 2, 1])),
                  cluster(), refuse_foreign_in_flight=False)
    # Between the two (a resumed run whose first KIP-435 steps finished: 3 added, 4 dropped): fine.
    validate_plan(plan(e(partition=1, replicas=[1, 3, 5], original_replicas=[1, 2, 4])), cluster(),
                  refuse_foreign_in_flight=False)
    # A broker that is neither where it started nor where it goes: someone else moved it.
    with pytest.raises(PlanValidationError) as info:
        validate_plan(plan(e(partition=1, replicas=[4, 1, 2], original_replicas=[1, 4, 2])), cluster(),
                      refuse_foreign_in_flight=False)
    assert "stale_plan" in info.value.kinds
    with pytest.raises(PlanValidationError) as info:
        validate_plan(plan(e(partition=1, replicas=[1, 2, 4], original_replicas=[1, 2, "x"])), cluster(),
                      refuse_foreign_in_flight=False)
    assert "bad_original_replicas" in info.value.kinds


def test_parsed_plan_object_accepted():
    validate_plan(ReassignmentPlan.from_json(plan(e(replicas=[1, 2, 4]))), cluster(), refuse_foreign_in_flight=False)


def test_validated_plan_is_the_plan_from_json_parses_or_the_one_given():
    import json
    raw = plan(e(partition=0, replicas=[1, 2, 4], log_dirs=["any", "/d2", "any"]),
               e(partition=1, replicas=[1, 2, 5], original_replicas=[1, 2, 3]))
    for given in (raw, json.dumps(raw)):
        parsed, warnings = validated_plan(given, cluster(), refuse_foreign_in_flight=False)
        assert parsed == ReassignmentPlan.from_json(given)
        assert warnings == validate_plan(given, cluster(), refuse_foreign_in_flight=False)
    already = ReassignmentPlan.from_json(raw)
    assert validated_plan(already, cluster(), refuse_foreign_in_flight=False)[0] is already
    with pytest.raises(PlanValidationError):
        validated_plan(plan(e(topic="nope")), cluster())

def test_params_defaults_and_each_rejection():
    assert validate_params({}) == ReassignParams()
    assert validate_params({"throttle_bytes_per_sec": None}).throttle_bytes_per_sec is None
    assert validate_params({"max_partition_movements": 5.0}).max_partition_movements == 5
    bad = {"throttle_bytes_per_sec": 0, "max_partition_movements": 0, "max_movements_per_broker": -1,
           "max_leader_movements": "3", "batch_timeout_minutes": 0, "dry_run": "yes",
           "stall_window_seconds": float("nan"), "bogus": 1, "kafka_conn_id": "kafka_default",
           "movement_strategy": "random"}
    with pytest.raises(ParamError) as info:
        validate_params(bad)
    entries = {p.entry for p in info.value.problems}
    assert entries == {"throttle_bytes_per_sec", "max_partition_movements", "max_movements_per_broker",
                       "max_leader_movements", "batch_timeout_minutes", "dry_run", "stall_window_seconds", "bogus",
                       "movement_strategy"}
    assert "must be an integer >= 1024, got 0" in str(info.value)
    assert "unknown ordering strategy 'random': use one or more of busiest-brokers" in str(info.value)
    # A comma list is the strategies in turn; the executor's limits carry it.
    from kafka_reassign.execution.limits import ExecutionLimits
    p = validate_params({"movement_strategy": " postpone-urp, largest-first"})
    assert p.movement_strategy == "postpone-urp,largest-first"
    assert ExecutionLimits.from_params(p).strategy == "postpone-urp,largest-first"


def test_params_round_trip():
    p = validate_params({"throttle_bytes_per_sec": 2_000_000, "dry_run": True})
    assert ReassignParams.from_json(p.to_json()) == p


def test_rack_concentration_is_a_warning():
    # Brokers 1 and 4 are both in rack "b" (i % 3): two of three replicas in one rack.
    warnings = validate_plan(plan(e(partition=0, replicas=[1, 4, 2])), cluster(), refuse_foreign_in_flight=False)
    assert any("puts its 3 replicas in 2 rack(s)" in w for w in warnings)
