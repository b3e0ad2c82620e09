"""``kafka-reassign execute`` and ``cancel`` against the real Apache Kafka cluster.

The simulator's versions are tests/integration/test_cli.py, test_cli_cancel.py and
test_reassign_core.py. Here the tool runs as its console script, as an operator runs it, and
what it did is read back through confluent-kafka, kcat and kafka-python's own admin client:
the throttle while the moves run, the placement after, and every config back to its prior
value with the source Kafka reports for it.
"""
from __future__ import annotations

import signal

import pytest

from real_kafka_checks import describe, placement, throttle_configs
from real_kafka_moves import (alter, alter_cluster_default, cli, config_command, execute_args, finish, in_flight,
                              loaded_topic, record_of, replica_dirs, sourced, wait_until, write_plan)
from real_kafka_moves import runs  # noqa: F401 - a fixture, requested by name

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def plan_parts(topic: str, targets: dict[int, list[int]]) -> list[dict]:
    return [{"topic": topic, "partition": p, "replicas": r} for p, r in targets.items()]


def ours_in_flight(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """partition -> target of the reassignments of ``topic`` in flight."""
    return {p: r for (t, p), r in in_flight(bootstrap).items() if t == topic}


def test_execute_throttles_while_moving_then_restores(runs, real_bootstrap, local_kafka, topic_name, tmp_path):
    """Rates on every broker that sends or receives, the replica lists of the moves in flight on
    the topic; the moves land where the plan says; every config is back to its prior value."""
    bs, brokers = real_bootstrap, local_kafka.brokers
    # Larger than the burst an idle quota lets through at once (Kafka's 11 one-second samples:
    # about 10 s of the rate), so each move stays in flight for seconds under 1 MB/s.
    topic = loaded_topic(bs, topic_name("exec"), {0: [1, 2, 3], 1: [2, 3, 1]}, 16)
    targets = {0: [4, 2, 3], 1: [5, 3, 1]}
    before = throttle_configs(bs, brokers, [topic])
    proc = runs(*execute_args(bs, write_plan(tmp_path, plan_parts(topic, targets)), tmp_path / "rec", "thr",
                                   "--throttle", "1MB/s"))
    rate = ("1000000", "DYNAMIC_BROKER_CONFIG")
    want = {**{f"broker {b}": {LEADER_RATE: rate, FOLLOWER_RATE: rate} for b in (1, 2, 3, 4, 5)},
            f"topic {topic}": {LEADER_REPLICAS: ("0:1,0:2,0:3,1:1,1:2,1:3", "DYNAMIC_TOPIC_CONFIG"),
                               FOLLOWER_REPLICAS: ("0:4,1:5", "DYNAMIC_TOPIC_CONFIG")}}
    # Read while both moves are in flight: the throttle is really on Kafka.
    during = wait_until(lambda: len(ours_in_flight(bs, topic)) == 2 and throttle_configs(bs, brokers, [topic]) == want
                        and proc.poll() is None, 90, "both moves in flight under our throttle", proc=proc)
    assert during
    rc, out, err = finish(proc)
    assert rc == 0, out[-3000:] + err[-3000:]
    assert "run thr: throttle restored (10 config write(s))" in out  # the rates; the lists follow the moves
    assert "run thr finished: 2 step(s) done, throttles restored" in out
    assert placement(bs, topic) == targets
    assert ours_in_flight(bs, topic) == {}
    assert throttle_configs(bs, brokers, [topic]) == before == {}
    assert record_of(tmp_path / "rec", "thr").restored
    # Kafka's brokers answer DescribeConfigs a moment behind the controller: no read-back of the
    # restore may mistake that lag for someone else's change.
    assert "someone else" not in out + err


def _set_priors(cluster, bs: str, topic: str) -> None:
    """An operator's throttles before the run: per-broker values, a cluster-wide default, '*' lists."""
    alter(bs, "broker", "4", {LEADER_RATE: "30000000"})      # higher than ours: lowered, then given back
    alter(bs, "broker", "1", {FOLLOWER_RATE: "500000"})      # lower than ours: kept as it is
    # Kafka's own tool for the cluster-wide default (the DYNAMIC_DEFAULT_BROKER_CONFIG source).
    config_command(cluster, "--alter", "--entity-type", "brokers", "--entity-default",
                   "--add-config", f"{FOLLOWER_RATE}=40000000")
    alter(bs, "topic", topic, {LEADER_REPLICAS: "*", FOLLOWER_REPLICAS: "*"})


def _clear_priors(cluster, bs: str, topic: str) -> None:
    alter(bs, "broker", "4", {LEADER_RATE: None})
    alter(bs, "broker", "1", {FOLLOWER_RATE: None})
    alter_cluster_default(bs, {FOLLOWER_RATE: None})
    alter(bs, "topic", topic, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None})


def test_prior_throttles_come_back_exactly_with_their_sources(runs, real_bootstrap, local_kafka, topic_name,
                                                              tmp_path):
    """A per-broker value, a cluster-wide default and '*' lists, each restored with its own source;
    the default never turns into a per-broker override."""
    bs, brokers = real_bootstrap, local_kafka.brokers
    topic = loaded_topic(bs, topic_name("prior"), {0: [1, 2, 3]}, 5)
    try:
        _set_priors(local_kafka, bs, topic)
        default = ("40000000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        # Kafka's tool returns once the controller has the write; each broker shows it a moment later.
        set_by_someone = ("DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_BROKER_CONFIG")
        wait_until(lambda: all(describe(bs, "broker", str(b)).get(FOLLOWER_RATE, (None, ""))[1] in set_by_someone
                               for b in brokers), 60, "the cluster-wide default shows on every broker")
        before = throttle_configs(bs, brokers, [topic])
        rc, out, err = finish(runs(*execute_args(bs, write_plan(tmp_path, plan_parts(topic, {0: [4, 2, 3]})),
                                                      tmp_path / "rec", "prior", "--throttle", "2MB/s")))
        assert rc == 0, out[-3000:] + err[-3000:]
        assert placement(bs, topic) == {0: [4, 2, 3]}
        assert "broker 1: follower.replication.throttled.rate is already 500.0 KB/s" in out, "theirs, lower, kept"
        assert throttle_configs(bs, brokers, [topic]) == before
        assert sourced(bs, "broker", "4", (LEADER_RATE, FOLLOWER_RATE)) == {
            LEADER_RATE: ("30000000", "DYNAMIC_BROKER_CONFIG"), FOLLOWER_RATE: default}
        assert sourced(bs, "broker", "1", (FOLLOWER_RATE,)) == {FOLLOWER_RATE: ("500000", "DYNAMIC_BROKER_CONFIG")}
        # Where only the default existed, the run's per-broker override is gone again (not set to the default).
        for b in (2, 3, 5, 6):
            assert sourced(bs, "broker", str(b), (FOLLOWER_RATE,)) == {FOLLOWER_RATE: default}, f"broker {b}"
        assert sourced(bs, "topic", topic, (LEADER_REPLICAS, FOLLOWER_REPLICAS)) == {
            LEADER_REPLICAS: ("*", "DYNAMIC_TOPIC_CONFIG"), FOLLOWER_REPLICAS: ("*", "DYNAMIC_TOPIC_CONFIG")}
        assert "someone else" not in out + err
    finally:
        _clear_priors(local_kafka, bs, topic)


def test_a_lower_cluster_wide_default_is_kept_as_theirs(real_bootstrap, topic_name, tmp_path):
    """The merge rule (the lower of theirs and ours) applied to a default protecting every broker."""
    bs = real_bootstrap
    topic = loaded_topic(bs, topic_name("lowdef"), {0: [1, 2, 3]}, 0.2)
    alter_cluster_default(bs, {LEADER_RATE: "1000000"})
    try:
        done = cli(*execute_args(bs, write_plan(tmp_path, plan_parts(topic, {0: [4, 2, 3]})), tmp_path / "rec",
                                 "lowdef", "--throttle", "2MB/s", "--dry-run"))
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"SET    broker 1: {LEADER_RATE}" not in done.stdout, "1 MB/s on every broker is already lower"
        assert f"broker 1: {LEADER_RATE} is already 1.0 MB/s (cluster default), lower than ours" in done.stdout
    finally:
        alter_cluster_default(bs, {LEADER_RATE: None})


def test_log_dir_move_between_two_disks_of_one_broker(runs, real_bootstrap, local_kafka, topic_name, tmp_path):
    """KIP-113: the replica on broker 1 goes to its other log dir under the log-dir throttle."""
    bs, brokers = real_bootstrap, local_kafka.brokers
    topic = loaded_topic(bs, topic_name("dirs"), {0: [1, 2, 3]}, 4)
    home = replica_dirs(bs, 1, topic)[(0, False)]
    (other,) = [d for d in brokers[1].log_dirs if d != home]
    parts = [{"topic": topic, "partition": 0, "replicas": [1, 2, 3], "log_dirs": [other, "any", "any"]}]
    proc = runs(*execute_args(bs, write_plan(tmp_path, parts), tmp_path / "rec", "dirs", "--throttle", "1MB/s"))
    # During the copy DescribeLogDirs lists two replicas on broker 1: the current one and the
    # future one in the new dir; the log-dir throttle is on broker 1 only.
    wait_until(lambda: replica_dirs(bs, 1, topic) == {(0, False): home, (0, True): other}, 60,
               "a future replica in the other log dir", proc=proc)
    assert wait_until(lambda: throttle_configs(bs, brokers, [topic]) == {
        "broker 1": {LOG_DIR_RATE: ("1000000", "DYNAMIC_BROKER_CONFIG")}} and proc.poll() is None, 30,
        "the log-dir throttle on broker 1 while the copy runs", proc=proc)
    rc, out, err = finish(proc)
    assert rc == 0, out[-3000:] + err[-3000:]
    assert replica_dirs(bs, 1, topic) == {(0, False): other}
    assert placement(bs, topic) == {0: [1, 2, 3]}
    assert throttle_configs(bs, brokers, [topic]) == {}
    assert "run dirs: throttle restored (1 config write(s))" in out and "someone else" not in out + err


@pytest.mark.parametrize("how", ["cancel", "sigterm"])
def test_cancel_mid_run_reverts_and_restores(runs, real_bootstrap, local_kafka, topic_name, tmp_path, how):
    """``kafka-reassign cancel`` from another process, or SIGTERM to execute: our in-flight moves go
    back to their original replicas in their original order, the throttle is restored, exit 130."""
    bs, brokers = real_bootstrap, local_kafka.brokers
    original = {0: [1, 2, 3], 1: [2, 3, 1]}
    topic = loaded_topic(bs, topic_name(f"cancel-{how}"), original, 10)
    rec = tmp_path / "rec"
    # 10 MB at 500 KB/s: in flight for about 20 s, long after the cancel.
    proc = runs(*execute_args(bs, write_plan(tmp_path, plan_parts(topic, {0: [4, 5, 3], 1: [5, 6, 1]})),
                                   rec, how, "--throttle", "500KB/s"))
    wait_until(lambda: len(ours_in_flight(bs, topic)) == 2, 90, "both moves in flight", proc=proc)
    wait_until(lambda: (rec / f"exec-{how}.json").exists(), 30, "the run saved its progress", proc=proc)
    if how == "cancel":
        done = cli("cancel", "--record-dir", str(rec), "--wait", "240")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"run {how} cancelled: in-flight moves reverted" in done.stdout
    else:
        proc.send_signal(signal.SIGTERM)
    rc, out, err = finish(proc)
    assert rc == 130, out[-3000:] + err[-3000:]
    assert "throttle restored" in out
    assert ours_in_flight(bs, topic) == {}
    # Back on the original replicas in their order (Kafka's revert alone gives adding-less order).
    wait_until(lambda: placement(bs, topic) == original, 30, f"{topic} back to {original} in order")
    assert throttle_configs(bs, brokers, [topic]) == {}
    assert record_of(rec, how).restored
    assert not list(rec.glob("running-*")) and not list(rec.glob("cancel-*"))
