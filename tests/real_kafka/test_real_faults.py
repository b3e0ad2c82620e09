"""The fault matrix's rows that real Kafka can play, and bad input, against the real cluster.

The simulator's versions are tests/integration/test_fault_matrix.py (benchmarks/faults.py)
and test_cli.py. Here a broker JVM is really killed with SIGKILL, another admin really edits
the configs through confluent-kafka, another tool's reassignment is really in flight; each
row checks what the run did, that nothing of ours is left and nothing of theirs was changed.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from real_kafka_checks import describe, placement, throttle_configs
from real_kafka_moves import (alter, cli, everything, execute_args, finish, in_flight, loaded_topic, reassign,
                              record_of, wait_until, write_plan)
from real_kafka_moves import runs  # noqa: F401 - a fixture, requested by name

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
#: In the names of topics made here (not through topic_name): unique on a reused cluster too.
RUN = os.getpid()


def one_move(tmp_path: Path, topic: str, target: list[int]) -> str:
    return write_plan(tmp_path, [{"topic": topic, "partition": 0, "replicas": target}])


def moving(bs: str, topic: str) -> bool:
    return (topic, 0) in in_flight(bs)


def test_broker_killed_mid_move_then_restarted(runs, real_bootstrap, local_kafka, topic_name, tmp_path):
    """kill -9 of the receiving broker mid-copy, then its restart within the stall window: the run
    completes (the tool's rule), restores its throttle and leaves the others' values as they were."""
    bs, brokers = real_bootstrap, local_kafka.brokers
    # More than the ~10 s of the rate an idle quota lets through at once: still copying at the kill.
    topic = loaded_topic(bs, topic_name("kill"), {0: [1, 2, 3]}, 20)
    theirs = {"6": {LEADER_RATE: "7000000"}, "2": {FOLLOWER_RATE: "3000000"}}  # one idle broker, one we lower
    for b, values in theirs.items():
        alter(bs, "broker", b, values)
    try:
        before = throttle_configs(bs, brokers, [topic])
        proc = runs(*execute_args(bs, one_move(tmp_path, topic, [4, 2, 3]), tmp_path / "rec", "kill",
                                       "--throttle", "1MB/s"))
        wait_until(lambda: moving(bs, topic) and describe(bs, "broker", "4")[FOLLOWER_RATE][0] == "1000000", 90,
                   "the move to broker 4 under our throttle", proc=proc)
        local_kafka.kill_broker(4)        # SIGKILL: no controlled shutdown, its copy stops mid-way
        local_kafka.start_broker(4)       # back on its log dirs; returns once it is unfenced again
        rc, out, err = finish(proc, 400)
        assert rc == 0, out[-3000:] + err[-3000:]
        assert "run kill finished: 1 step(s) done, throttles restored" in out
        assert placement(bs, topic) == {0: [4, 2, 3]}
        assert not moving(bs, topic)
        assert throttle_configs(bs, brokers, [topic]) == before, "theirs as they were, nothing of ours"
        assert record_of(tmp_path / "rec", "kill").restored
    finally:
        for b, values in theirs.items():
            alter(bs, "broker", b, {k: None for k in values})


def test_throttle_deleted_by_another_admin_is_put_back_then_restored(runs, real_bootstrap, local_kafka, topic_name,
                                                                      tmp_path):
    """Another admin deletes our rate and our replica list mid-run: the guard writes them again
    (recorded first), and the restore at the end leaves nothing."""
    bs, brokers = real_bootstrap, local_kafka.brokers
    # 24 MB at 1 MB/s: the move outlasts the deletion and the guard's next poll (with 8 MB it could
    # finish first, leader-side throttled only, and the run end before the guard looked).
    topic = loaded_topic(bs, topic_name("guard"), {0: [1, 2, 3]}, 24)
    proc = runs(*execute_args(bs, one_move(tmp_path, topic, [4, 2, 3]), tmp_path / "rec", "guard",
                                   "--throttle", "1MB/s"))
    ours = ("1000000", "DYNAMIC_BROKER_CONFIG")
    wait_until(lambda: moving(bs, topic) and describe(bs, "broker", "4")[FOLLOWER_RATE] == ours
               and describe(bs, "topic", topic)[FOLLOWER_REPLICAS][0] == "0:4", 90,
               "the move under our throttle", proc=proc)
    alter(bs, "broker", "4", {FOLLOWER_RATE: None})
    alter(bs, "topic", topic, {FOLLOWER_REPLICAS: None})
    # Read right after a deletion, a broker may leave the key out of DescribeConfigs altogether.
    wait_until(lambda: describe(bs, "broker", "4").get(FOLLOWER_RATE) == ours
               and describe(bs, "topic", topic).get(FOLLOWER_REPLICAS, ("",))[0] == "0:4" and proc.poll() is None, 60,
               "the guard puts our throttle back while the move goes on", proc=proc)
    rc, out, err = finish(proc)
    assert rc == 0, out[-3000:] + err[-3000:]
    assert "the throttle was removed or raised by someone else during the run and re-applied" in out
    record = record_of(tmp_path / "rec", "guard")
    writes = [(c.prior, c.value) for c in record.changes if (c.name, c.key) == ("4", FOLLOWER_RATE)]
    assert writes == [(None, "1000000"), (None, "1000000")], "the re-application was recorded, found deleted"
    assert any("throttle guard re-applied" in n for n in record.notes)
    assert record.restored
    assert placement(bs, topic) == {0: [4, 2, 3]}
    assert throttle_configs(bs, brokers, [topic]) == {}


def _start_theirs(bs: str, topic: str) -> None:
    """Another tool's move of ``topic``-0 to broker 6, throttled to 10 KB/s: in flight for minutes."""
    alter(bs, "broker", "6", {FOLLOWER_RATE: "10000"})
    alter(bs, "topic", topic, {FOLLOWER_REPLICAS: "0:6"})
    reassign(bs, {(topic, 0): [6, 2, 3]})


def _stop_theirs(bs: str, topic: str) -> None:
    """Cancel it (as its owner would) and remove its throttle: the next test starts clean."""
    reassign(bs, {(topic, 0): None})
    wait_until(lambda: not moving(bs, topic), 60, f"{topic}-0 cancelled")
    alter(bs, "broker", "6", {FOLLOWER_RATE: None})
    alter(bs, "topic", topic, {FOLLOWER_REPLICAS: None})


def test_another_tools_reassignment_is_refused_and_left_alone(real_bootstrap, local_kafka, topic_name, tmp_path):
    """validate and execute refuse while someone else reassigns (the same partition or another);
    their move keeps going, with their throttle, and we write nothing."""
    bs = real_bootstrap
    theirs = loaded_topic(bs, topic_name("theirs"), {0: [1, 2, 3]}, 4)
    ours = loaded_topic(bs, topic_name("ours"), {0: [1, 2, 3]}, 1)
    _start_theirs(bs, theirs)
    try:
        wait_until(lambda: in_flight(bs).get((theirs, 0)) == [6, 2, 3], 60, "their move in flight")
        before = everything(bs, local_kafka.brokers)
        rec = tmp_path / "rec"
        cases = [(ours, f"{theirs}-0 is being reassigned to [6,2,3] by someone else (not in this plan)"),
                 (theirs, f"{theirs}-0 is already being reassigned to [6,2,3] by someone else")]
        for topic, fragment in cases:
            plan = one_move(tmp_path, topic, [4, 2, 3])
            validate = [["validate", "--bootstrap-server", bs, "--plan", plan]] if topic == ours else []
            for args in [*validate, execute_args(bs, plan, rec, f"refused-{topic}", "--throttle", "1MB/s")]:
                done = cli(*args)
                assert done.returncode == 2, done.stdout + done.stderr
                assert "plan rejected, nothing was written" in done.stderr and fragment in done.stderr, done.stderr
        assert everything(bs, local_kafka.brokers) == before, "their move and their throttle untouched"
        assert in_flight(bs)[(theirs, 0)] == [6, 2, 3], "never cancelled"
        assert not list(rec.glob("throttle-*")), "no throttle record: nothing was written"
    finally:
        _stop_theirs(bs, theirs)
    # Kafka reverts a cancel to the replicas less those being added: [6,2,3,1] -> [2,3,1].
    assert placement(bs, theirs) == {0: [2, 3, 1]}


@pytest.fixture(scope="module")
def idle_topic(local_kafka) -> str:
    """One topic for the bad-input cases (none of them may change it)."""
    return loaded_topic(local_kafka.bootstrap_servers, f"bad-input-{RUN}", {0: [1, 2, 3]}, 0.2)


@pytest.mark.parametrize("case", ["unknown topic", "missing broker", "rf change", "bad throttle"])
def test_bad_input_exit_2_and_nothing_written(real_bootstrap, local_kafka, idle_topic, tmp_path, case):
    """A clear message naming the problem, exit code 2, and not one write to the cluster."""
    bs, topic = real_bootstrap, idle_topic
    target, extra = {"unknown topic": (f"no-such-{RUN}", [1, 2, 3]), "missing broker": (topic, [1, 2, 9]),
                     "rf change": (topic, [1, 2, 3, 4]), "bad throttle": (topic, [4, 2, 3])}[case], []
    expected = {"unknown topic": f"partitions[0] (no-such-{RUN}-0): unknown topic 'no-such-{RUN}'",
                "missing broker": f"partitions[0] ({topic}-0): broker 9 does not exist (brokers: ",
                "rf change": f"replication factor change 3 -> 4 ([1,2,3] -> [1,2,3,4]) needs allow_rf_change",
                "bad throttle": "argument --throttle: rate '10MB/h' is not understood"}[case]
    if case == "bad throttle":
        extra = ["--throttle", "10MB/h"]
    before = everything(bs, local_kafka.brokers)
    rec = tmp_path / "rec"
    done = cli(*execute_args(bs, one_move(tmp_path, *target), rec, "bad", *extra))
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr, done.stderr
    if case != "bad throttle":
        assert "plan rejected, nothing was written (1 problem)" in done.stderr
    assert everything(bs, local_kafka.brokers) == before
    assert placement(bs, topic) == {0: [1, 2, 3]}
    assert not list(rec.glob("throttle-*"))
