"""Reassignment JSON parsing and writing (kafka_reassign.planning.plan)."""
from __future__ import annotations

import json

import pytest

from kafka_reassign.errors import PlanError
from kafka_reassign.planning.plan import PartitionMove, ReassignmentPlan

KAFKA_TOOL_OUTPUT = """{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[4,2,3],
"log_dirs":["any","any","any"]},{"topic":"orders","partition":1,"replicas":[2,3,4],"log_dirs":["any","/d2","any"]}]}"""

# Cruise Control and topicmappr add fields of their own; they must be tolerated.
TOPICMAPPR_OUTPUT = {"version": 1, "partitions": [
    {"topic": "payments", "partition": 3, "replicas": [1, 5], "size": 1234, "reason": "rebalance"}],
    "generated_by": "topicmappr"}


def test_reads_kafka_tool_output_with_log_dirs():
    plan = ReassignmentPlan.from_json(KAFKA_TOOL_OUTPUT)
    assert plan.moves[0] == PartitionMove("orders", 0, (4, 2, 3), ("any", "any", "any"))
    assert plan.moves[1].wanted_dirs() == {3: "/d2"}


def test_tolerates_extra_fields_and_missing_log_dirs():
    plan = ReassignmentPlan.from_json(TOPICMAPPR_OUTPUT)
    assert plan.moves == [PartitionMove("payments", 3, (1, 5), None)]
    assert plan.to_json() == {"version": 1, "partitions": [
        {"topic": "payments", "partition": 3, "replicas": [1, 5]}]}


def test_round_trip_through_file(tmp_path):
    plan = ReassignmentPlan.from_json(KAFKA_TOOL_OUTPUT)
    path = tmp_path / "plan.json"
    plan.dump(path)
    assert ReassignmentPlan.load(path) == plan
    # What we write is what kafka-reassign-partitions.sh reads: version + partitions only.
    assert set(json.loads(path.read_text())) == {"version", "partitions"}


@pytest.mark.parametrize("entry, fragment", [
    ({"topic": "orders", "partition": 7, "replicas": ["4", 2]}, "partitions[0] (orders-7): replicas[0] must be an integer"),
    ({"topic": "orders", "partition": 7, "replicas": [4.0, 2]}, "replicas[0] must be an integer"),
    ({"topic": "orders", "partition": 7, "replicas": [True, 2]}, "replicas[0] must be an integer"),
    ({"topic": "orders", "partition": -1, "replicas": [1]}, "partition must be >= 0"),
    ({"topic": "orders", "partition": "7", "replicas": [1]}, "partition must be an integer"),
    ({"topic": "", "partition": 0, "replicas": [1]}, "topic must be a non-empty string"),
    ({"topic": "orders", "partition": 7, "replicas": 4}, "replicas must be a list"),
    ({"topic": "orders", "partition": 7, "replicas": [-4]}, "replicas[0] must be >= 0"),
    ({"topic": "orders", "partition": 7, "replicas": [1], "log_dirs": "any"}, "log_dirs must be a list"),
    ({"topic": "orders", "partition": 7, "replicas": [1], "log_dirs": ["d1"]}, "'any' or an absolute path"),
])
def test_strict_about_types_and_names_the_entry(entry, fragment):
    with pytest.raises(PlanError) as info:
        ReassignmentPlan.from_json({"version": 1, "partitions": [entry]})
    assert fragment in str(info.value)


def test_reports_every_problem_not_just_the_first():
    obj = {"version": 2, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [1]},
        {"topic": "orders", "partition": 3, "replicas": ["x"]},
        "junk"]}
    with pytest.raises(PlanError) as info:
        ReassignmentPlan.from_json(obj)
    msg = str(info.value)
    assert "version: must be 1" in msg
    assert "partitions[1] (orders-3)" in msg
    assert "partitions[2]: must be an object" in msg
    assert info.value.kinds == {"bad_version", "bad_broker_id", "bad_entry"}


@pytest.mark.parametrize("text, kind", [("[1,2]", "not_object"), ("{", "not_json"),
                                        ('{"version":1}', "bad_partitions")])
def test_document_level_errors(text, kind):
    with pytest.raises(PlanError) as info:
        ReassignmentPlan.from_json(text)
    assert kind in info.value.kinds


def test_load_missing_file_is_a_plan_error(tmp_path):
    with pytest.raises(PlanError, match="cannot read plan file"):
        ReassignmentPlan.load(tmp_path / "nope.json")


def test_decode_plan_text_reads_plain_json_and_generate_output():
    from kafka_reassign.planning.plan import decode_plan_text

    plain = '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}'
    assert decode_plan_text(plain) == (json.loads(plain), None)
    generated = ("Current partition replica assignment\n"
                 '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,4],"log_dirs":["any","any"]}]}\n'
                 "\nProposed partition reassignment configuration\n" + plain + "\n")
    proposed, current = decode_plan_text(generated)
    assert proposed == json.loads(plain) and current["partitions"][0]["replicas"] == [3, 4]
    assert ReassignmentPlan.from_json(generated).moves[0].replicas == (1, 2)


def test_decode_plan_text_names_both_accepted_forms():
    from kafka_reassign.planning.plan import decode_plan_text

    with pytest.raises(PlanError, match=r"p.txt: not valid JSON .* and not the output of kafka-reassign-partitions.sh "
                                        r"--generate"):
        decode_plan_text("Proposed partitions: none", source="p.txt")
    with pytest.raises(PlanError, match="the JSON after 'Proposed partition reassignment configuration' is not valid"):
        decode_plan_text("Proposed partition reassignment configuration\n{broken", source="p.txt")
