"""Issue 20 on the real Apache Kafka cluster: log dir capacities as brokers report them (KIP-827)
and as an operator overrides them, and one run mixing broker moves with moves between the log
dirs of one broker (KIP-113), each under its own throttle, priors restored with their source.

The tool runs as its console script; what it did is read back through confluent-kafka, kcat,
kafka-python's own admin client and ``os.statvfs`` (the brokers' log dirs are local here).
"""
from __future__ import annotations

import json
import os

from real_kafka_checks import placement, throttle_configs
from real_kafka_moves import (alter, cli, execute_args, finish, loaded_topic, replica_dirs, sourced, wait_until,
                              write_plan)
from real_kafka_moves import runs  # noqa: F401 - a fixture, requested by name

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
DYNAMIC = "DYNAMIC_BROKER_CONFIG"
#: usable bytes change while other processes write: the filesystem and the broker are read a
#: moment apart
USABLE_SLACK = 256 * 2**20


def test_snapshot_capacities_are_the_volumes_unless_the_operator_gives_them(real_bootstrap, local_kafka, tmp_path):
    """total_bytes / usable_bytes are what statvfs says of each log dir's filesystem; a capacity
    given with --log-dir-capacity wins (capacity_source user) in the snapshot and the planner's input;
    one naming a broker the cluster lacks is refused and nothing is written."""
    from kafka_reassign.planning.spark.cluster import Cluster

    out = tmp_path / "snap.json"
    given_dir = local_kafka.brokers[6].log_dirs[1]
    done = cli("snapshot", "--bootstrap-server", real_bootstrap, "--out", str(out),
               "--log-dir-capacity", f"6:{given_dir}=123456789", "--log-dir-capacity", "5=2GB")
    assert done.returncode == 0, done.stdout + done.stderr
    snap = json.loads(out.read_text())
    seen = 0
    for broker in snap["brokers"]:
        assert [d["path"] for d in broker["log_dirs"]] == sorted(local_kafka.brokers[broker["id"]].log_dirs)
        for d in broker["log_dirs"]:
            fs = os.statvfs(d["path"])
            assert d["total_bytes"] == fs.f_blocks * fs.f_frsize, d
            assert abs(d["usable_bytes"] - fs.f_bavail * fs.f_frsize) < USABLE_SLACK, d
            given = 123456789 if (broker["id"], d["path"]) == (6, given_dir) else 2 * 10**9 if broker["id"] == 5 \
                else None
            want = (given, "user") if given else (d["total_bytes"], "broker")
            assert (d["capacity_bytes"], d["capacity_source"]) == want, (broker["id"], d)
            seen += 1
    assert seen == 12  # 6 brokers x 2 log dirs
    planner = Cluster.from_snapshot(snap)
    caps = {(b, d.path): d.capacity_bytes for b, info in planner.brokers.items() for d in info.log_dirs}
    assert caps[(6, given_dir)] == 123456789 and caps[(5, local_kafka.brokers[5].log_dirs[0])] == 2e9

    refused = cli("snapshot", "--bootstrap-server", real_bootstrap, "--out", str(tmp_path / "no.json"),
                  "--log-dir-capacity", "9=1TB")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "broker 9 is not in the cluster (brokers: 1, 2, 3, 4, 5, 6)" in refused.stderr
    assert not (tmp_path / "no.json").exists()


def _broker_rates(bootstrap: str, brokers, topic: str, *, but: tuple[str, str] | None = None) -> dict:
    """The throttle rates set on the brokers (the topic's replica lists left out), ``but`` one
    (broker, key) left out too."""
    out = {k: dict(v) for k, v in throttle_configs(bootstrap, brokers, [topic]).items() if k.startswith("broker ")}
    if but is not None and but[0] in out:
        out[but[0]].pop(but[1], None)
    return {k: v for k, v in out.items() if v}


def test_one_run_moves_brokers_and_log_dirs_each_under_its_own_throttle(runs, real_bootstrap, local_kafka,
                                                                        topic_name, tmp_path):
    """Partition 0 moves to broker 4; partition 1's replica on broker 5 moves to its other log dir;
    partition 2 does both (to broker 4, then broker 2's replica to its other dir). The replication
    throttle sits on the brokers of the broker moves, the log-dir throttle at its own rate on the
    brokers with log-dir moves; an operator's prior values come back exactly, the rest is removed."""
    bs, brokers = real_bootstrap, local_kafka.brokers
    topic = loaded_topic(bs, topic_name("mixed"), {0: [1, 2, 3], 1: [5, 6, 1], 2: [2, 3, 1]}, 16)
    home5, home2 = replica_dirs(bs, 5, topic)[(1, False)], replica_dirs(bs, 2, topic)[(2, False)]
    (other5,) = [d for d in brokers[5].log_dirs if d != home5]
    (other2,) = [d for d in brokers[2].log_dirs if d != home2]
    parts = [{"topic": topic, "partition": 0, "replicas": [4, 2, 3]},
             {"topic": topic, "partition": 1, "replicas": [5, 6, 1], "log_dirs": [other5, "any", "any"]},
             {"topic": topic, "partition": 2, "replicas": [2, 3, 4], "log_dirs": [other2, "any", "any"]}]
    try:
        # The operator's own values, both higher than ours: lowered for the run, then given back.
        alter(bs, "broker", "4", {LEADER_RATE: "30000000"})
        alter(bs, "broker", "5", {LOG_DIR_RATE: "50000000"})
        before = throttle_configs(bs, brokers, [topic])
        proc = runs(*execute_args(bs, write_plan(tmp_path, parts), tmp_path / "rec", "mixed",
                                  "--throttle", "2MB/s", "--log-dir-throttle", "1MB/s"))
        replication, log_dir = ("2000000", DYNAMIC), ("1000000", DYNAMIC)
        want = {**{f"broker {b}": {LEADER_RATE: replication, FOLLOWER_RATE: replication} for b in (1, 2, 3, 4)},
                "broker 5": {LOG_DIR_RATE: log_dir}}
        # 16 MB each: the broker moves into broker 4 take 16 s at 2 MB/s, a log-dir copy about 18 s
        # at 1 MB/s (Kafka's alter-log-dirs thread copies in bursts and starts with one, so at 2 MB/s
        # a copy took some 9 s, too short for a loaded machine's probe); broker 6 is untouched.
        # (broker 2's log-dir rate, for partition 2's last step, may be on from the start)
        assert wait_until(lambda: (1, True) in replica_dirs(bs, 5, topic) and proc.poll() is None
                          and _broker_rates(bs, brokers, topic, but=("broker 2", LOG_DIR_RATE)) == want, 90,
                          "broker and log-dir moves in flight, each under its throttle", proc=proc)
        # Partition 2's last step moves broker 2's replica between its dirs under the log-dir rate.
        assert wait_until(lambda: (2, True) in replica_dirs(bs, 2, topic) and proc.poll() is None
                          and _broker_rates(bs, brokers, topic).get("broker 2", {}).get(LOG_DIR_RATE) == log_dir,
                          120, "broker 2's replica copying to its other dir under the log-dir throttle", proc=proc)
        rc, out, err = finish(proc)
        assert rc == 0, out[-3000:] + err[-3000:]
        assert "someone else" not in out + err
        assert placement(bs, topic) == {0: [4, 2, 3], 1: [5, 6, 1], 2: [2, 3, 4]}
        assert replica_dirs(bs, 5, topic) == {(1, False): other5}
        on2 = replica_dirs(bs, 2, topic)
        assert on2[(2, False)] == other2 and not [k for k in on2 if k[1]], on2  # no future replica left
        after = throttle_configs(bs, brokers, [topic])
        assert after == before == {"broker 4": {LEADER_RATE: ("30000000", DYNAMIC)},
                                   "broker 5": {LOG_DIR_RATE: ("50000000", DYNAMIC)}}
        # The keys the run set elsewhere are gone: Kafka's own default again, not a copy of it.
        for b in (1, 2, 3, 4, 5, 6):
            for key, (_, source) in sourced(bs, "broker", str(b), (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)).items():
                assert source == DYNAMIC if (b, key) in ((4, LEADER_RATE), (5, LOG_DIR_RATE)) else \
                    source == "DEFAULT_CONFIG", (b, key, source)
    finally:
        alter(bs, "broker", "4", {LEADER_RATE: None})
        alter(bs, "broker", "5", {LOG_DIR_RATE: None})
