"""ClusterModel replication physics and reassignment, in manual simulated time."""
from __future__ import annotations

import pytest

from kafka_sim import errors as E
from kafka_sim.alter_dirs import effective_rate
from kafka_sim.fairshare import allocate

from test_sim_model_helpers import GB, MB, batch, done, manual, run_until, snapshot, topic

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def throttle(model, brokers, rate, t="t", leader="*", follower="*"):
    for b in brokers:
        assert model.incremental_alter_configs(4, str(b), [("leader.replication.throttled.rate", SET, str(rate)),
                                                           ("follower.replication.throttled.rate", SET, str(rate))]
                                               ) == (E.NONE, None)
    assert model.incremental_alter_configs(2, t, [("leader.replication.throttled.replicas", SET, leader),
                                                  ("follower.replication.throttled.replicas", SET, follower)]
                                           ) == (E.NONE, None)


def test_allocate_is_max_min_fair():
    # two flows share resource A (10); flow 1 also crosses B (2): flow 1 gets 2, flow 0 the rest
    assert allocate([("A",), ("A", "B")], {"A": 10.0, "B": 2.0}) == [8.0, 2.0]
    assert allocate([("A",), ("A",)], {"A": 10.0}) == [5.0, 5.0]
    assert allocate([("X",)], {}, unlimited=7.0) == [7.0]


@pytest.mark.parametrize("rate", [10 * MB, 37 * MB])
def test_throttled_move_takes_bytes_over_rate(rate):
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    throttle(m, [1, 2, 3, 4], rate, leader="0:1,0:2,0:3", follower="0:4")
    assert m.alter_reassignments([("t", 0, [4, 2, 3])]) == [("t", 0, E.NONE, None)]
    took = run_until(m, done(m, "t", 0), step=0.1)
    # SimpleRate.windowSize: a fresh quota sensor's window is at least one 1 s sample, so
    # one second's worth goes through at once; bytes leave the window 11 s after they came
    # (sliding window, as Kafka's samples), so that early second is paid back: bytes / rate
    expected = GB / rate
    assert abs(took - expected) / expected < 0.02, (took, expected)


def test_unthrottled_move_limited_by_network_capacity():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    took = run_until(m, done(m, "t", 0), step=0.05)
    assert abs(took - GB / 125e6) < 0.1  # default 1 Gbit/s
    m2 = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)], network=50 * MB))
    m2.alter_reassignments([("t", 0, [4, 2, 3])])
    assert abs(run_until(m2, done(m2, "t", 0), step=0.05) - 20.0) < 0.1


def test_two_moves_into_one_broker_share_its_network():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3], [2, 3, 1]], size=GB)]))
    m.alter_reassignments([("t", 0, [4, 2, 3]), ("t", 1, [4, 3, 1])])
    took = run_until(m, lambda: done(m, "t", 0)() and done(m, "t", 1)(), step=0.05)
    assert abs(took - 2 * GB / 125e6) < 0.1  # both fetch into broker 4: 2 GB through 125 MB/s


def test_throttle_applies_only_to_listed_replicas():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3], [1, 2, 3]], size=GB)]))
    throttle(m, [1, 4, 5], 10 * MB, leader="0:1", follower="0:4")  # only partition 0 listed
    m.alter_reassignments([("t", 0, [4, 2, 3]), ("t", 1, [5, 2, 3])])
    t1 = run_until(m, done(m, "t", 1), step=0.1)
    assert t1 < 10  # unlisted: limited by broker 1's 125 MB/s shared with the 10 MB/s flow
    t0 = run_until(m, done(m, "t", 0), step=0.1)
    assert abs(t0 - 100) / 100 < 0.02


def test_star_throttles_every_replica_and_flows_share_the_quota():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3], [1, 2, 3]], size=GB)]))
    throttle(m, [1], 10 * MB)  # '*' lists; only broker 1 (the leader) has a rate
    m.alter_reassignments([("t", 0, [4, 2, 3]), ("t", 1, [5, 2, 3])])
    m.advance_by(50)
    st0, st1 = m.partition_state("t", 0), m.partition_state("t", 1)
    # one leader quota of 10 MB/s shared fairly by two throttled flows, after the burst an
    # idle leader sensor allows: its window is full (KafkaApis records every follower fetch,
    # zero bytes too), so 11 samples x 10 MB/s = 110 MB go through at once, and 10 MB more as
    # the span grows to 12 s; then nothing while the purges of empty samples pull the span
    # back, until the burst's sample leaves 12 s later: 120 MB at 0, 12, 24, 36, 48 s
    assert abs(st0["sizes"][4] - 300 * MB) < 8 * MB and abs(st1["sizes"][5] - 300 * MB) < 8 * MB
    took = run_until(m, lambda: done(m, "t", 0)() and done(m, "t", 1)(), step=0.1)
    assert abs(took - 192) / 192 < 0.02  # the 17th burst, at 16 x 12 s, moves the last 80 MB


def test_in_sync_replicas_are_never_throttled():
    # 20 MB/s of produce traffic, a 1 MB/s throttle on '*': in-sync followers keep up (KAFKA-4313)
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB, bytes_in=20 * MB)]))
    throttle(m, [1, 2, 3, 4], 1 * MB)
    m.advance_by(100)
    st = m.partition_state("t", 0)
    assert st["isr"] == [1, 2, 3]
    assert st["sizes"][1] == st["sizes"][2] == st["sizes"][3] == GB + 100 * 20 * MB
    # ...but their 2 x 20 MB/s is recorded in the leader's 1 MB/s quota (KafkaApis.handleFetchRequest
    # records every follower fetch of a throttled partition), so the quota stays exceeded and
    # the out-of-sync new replica is held back entirely (ReplicaManager.shouldLeaderThrottle)
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    m.advance_by(100)
    st = m.partition_state("t", 0)
    assert 4 not in st["isr"] and st["sizes"][4] == 0


def test_bytes_in_growth_is_followed_during_move():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB, bytes_in=25 * MB)]))
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    # leader 1 sends 2 x 25 MB/s to its in-sync followers: 75 MB/s left for broker 4,
    # while the log grows 25 MB/s: the gap closes at 50 MB/s
    took = run_until(m, done(m, "t", 0), step=0.05)
    assert abs(took - GB / (50 * MB)) < 0.1
    st = m.partition_state("t", 0)
    assert st["sizes"][4] == st["size_bytes"] == st["sizes"][2]


def test_completion_order_and_leader_reelected_from_target():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    epoch0 = m.partition_state("t", 0)["leader_epoch"]
    m.alter_reassignments([("t", 0, [4, 5, 3])])
    st = m.partition_state("t", 0)
    assert st["replicas"] == [4, 5, 3, 1, 2] and st["adding"] == [4, 5] and st["removing"] == [1, 2]
    assert st["leader"] == 1 and st["isr"] == [1, 2, 3]
    assert m.list_reassignments() == [("t", 0, [4, 5, 3, 1, 2], [4, 5], [1, 2])]
    seen_partial = False
    while not done(m, "t", 0)():
        m.advance_by(0.5)
        st = m.partition_state("t", 0)
        if st["adding"]:
            # old replicas stay until every target replica is in the ISR
            assert set(st["replicas"]) == {1, 2, 3, 4, 5} and st["leader"] == 1
            seen_partial = True
    assert seen_partial
    st = m.partition_state("t", 0)
    assert st["replicas"] == [4, 5, 3] and set(st["isr"]) == {3, 4, 5}
    assert st["leader"] == 4 and st["leader_epoch"] > epoch0
    assert m.list_reassignments() == []
    # the removed replicas' data is deleted
    for b in (1, 2):
        assert all(t_parts == [] for _p, _c, _tot, _u, t_parts in m.describe_log_dirs(b))
        assert m.partition("t", 0).replica(b) is None


def test_leader_kept_when_it_stays_in_target():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_reassignments([("t", 0, [1, 2, 4])])
    run_until(m, done(m, "t", 0))
    st = m.partition_state("t", 0)
    assert st["leader"] == 1 and st["replicas"] == [1, 2, 4]


def test_cancel_reverts_to_original_replicas():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    m.advance_by(2)
    assert m.partition_state("t", 0)["sizes"][4] == 250 * MB
    assert m.alter_reassignments([("t", 0, None)]) == [("t", 0, E.NONE, None)]
    st = m.partition_state("t", 0)
    # as in Kafka, the original replicas are the merged list minus the adding ones, so the
    # order is the merged order (target first): [4,2,3,1] - [4] = [2,3,1]; the leader stays
    assert st["replicas"] == [2, 3, 1] and st["adding"] == [] and st["removing"] == []
    assert sorted(st["isr"]) == [1, 2, 3] and st["leader"] == 1
    assert m.partition("t", 0).replica(4) is None
    assert all(parts == [] for *_x, parts in m.describe_log_dirs(4))
    assert m.list_reassignments() == []
    code = m.alter_reassignments([("t", 0, None)])[0][2]
    assert code == E.NO_REASSIGNMENT_IN_PROGRESS
    m.advance_by(100)
    assert m.partition_state("t", 0)["replicas"] == [2, 3, 1]


def test_altering_in_flight_reassignment_merges_with_current_replicas():
    # ReplicationControlManager.changePartitionReassignment: the new target is merged
    # against the current full replica list, so the earlier addition (4) is now removing
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    m.advance_by(2)
    m.alter_reassignments([("t", 0, [5, 2, 3])])
    st = m.partition_state("t", 0)
    assert st["replicas"] == [5, 2, 3, 1, 4] and st["adding"] == [5] and st["removing"] == [1, 4]
    assert m.partition("t", 0).replica(4) is not None  # kept until the reassignment completes
    # target back to the original replicas: 5 stays adding and is now removing too, so the
    # reassignment never completes (Kafka 4.3.1, benchmarks/calibration_states.py); a cancel
    # reverts to replicas - adding, which keeps 4
    m.alter_reassignments([("t", 0, [1, 2, 3])])
    m.advance_by(100)
    st = m.partition_state("t", 0)
    assert (st["replicas"], st["adding"], st["removing"]) == ([1, 2, 3, 4, 5], [5], [4, 5])
    m.alter_reassignments([("t", 0, None)])
    st = m.partition_state("t", 0)
    assert st["replicas"] == [1, 2, 3, 4] and not st["adding"] and not st["removing"]
    assert m.partition("t", 0).replica(4) is not None and m.partition("t", 0).replica(5) is None


def test_reorder_and_shrink_complete_at_once():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_reassignments([("t", 0, [2, 1, 3])])
    st = m.partition_state("t", 0)
    assert st["replicas"] == [2, 1, 3] and st["leader"] == 1 and not st["adding"]
    m.alter_reassignments([("t", 0, [2, 3])])
    st = m.partition_state("t", 0)
    assert st["replicas"] == [2, 3] and st["leader"] == 2 and st["isr"] == [2, 3]


def test_reassignment_errors():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]])]))
    res = m.alter_reassignments([("nope", 0, [1, 2, 3]), ("t", 7, [1, 2, 3]), ("t", 0, [1, 2, 99]),
                                 ("t", 0, [1, 1, 2]), ("t", 0, [])])
    codes = [r[2] for r in res]
    assert codes == [E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_REPLICA_ASSIGNMENT,
                     E.INVALID_REPLICA_ASSIGNMENT, E.INVALID_REPLICA_ASSIGNMENT]
    assert "broker 99, but no such broker is registered" in res[2][3]
    assert "broker 1 more than once" in res[3][3]
    assert "empty replica list" in res[4][3]
    assert m.write_count == 0
    assert m.partition_state("t", 0)["replicas"] == [1, 2, 3]


def test_new_replica_lands_in_dir_with_fewest_logs_or_preferred_dir():
    snap = snapshot(topics=[topic("big", [[4, 5, 6]], size=500 * GB), topic("t", [[1, 2, 3], [1, 2, 3]], size=GB)])
    snap["topics"][0]["partitions"][0]["log_dirs"] = ["/d1", "/d1", "/d1"]
    m = manual(snap)
    # broker 4's /d1 holds a log, /d2 none: a new replica goes to /d2 (LogManager.nextLogDirs)
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    assert m.partition("t", 0).replica(4).log_dir == "/d2"
    # a prior AlterReplicaLogDirs for a replica the broker does not hold decides its dir
    assert m.alter_replica_log_dirs(5, [("/d1", "t", 1)]) == [("t", 1, E.REPLICA_NOT_AVAILABLE)]
    m.alter_reassignments([("t", 1, [5, 2, 3])])
    assert m.partition("t", 1).replica(5).log_dir == "/d1"


def test_log_dir_move_at_intra_broker_rate():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    assert m.incremental_alter_configs(4, "1", [("replica.alter.log.dirs.io.max.bytes.per.second", SET,
                                                 str(20 * MB))]) == (E.NONE, None)
    assert m.alter_replica_log_dirs(1, [("/d2", "t", 0), ("/nope", "t", 0), ("/d2", "x", 0)]) == [
        ("t", 0, E.NONE), ("t", 0, E.LOG_DIR_NOT_FOUND), ("x", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
    # Kafka's alter-log-dirs thread copies in bursts, one per 1 s fetch back-off: below the bound
    rate = effective_rate(GB, 20 * MB, 16384, 1048576)
    assert 20 * MB * 10 / 11 < rate < 20 * MB
    m.advance_by(10)
    dirs = {path: parts for path, _c, _t, _u, parts in m.describe_log_dirs(1)}
    assert dirs["/d1"] == [("t", [(0, GB, 0, False)])]
    ((name, [(pid, size, lag, is_future)]),) = dirs["/d2"]
    assert (name, pid, is_future) == ("t", 0, True) and size == pytest.approx(10 * rate, rel=1e-6)
    took = run_until(m, lambda: m.partition("t", 0).replica(1).log_dir == "/d2", step=0.1)
    assert abs(took - GB / rate) / (GB / rate) < 0.02
    dirs = {path: parts for path, _c, _t, _u, parts in m.describe_log_dirs(1)}
    assert dirs["/d1"] == [] and dirs["/d2"] == [("t", [(0, GB, 0, False)])]
    # usable bytes come from capacity minus what the dir holds
    usable = {path: u for path, _c, _t, u, _p in m.describe_log_dirs(1)}
    assert usable["/d2"] == int(1e12 - GB) and usable["/d1"] == int(1e12)


def test_log_dir_move_unthrottled_uses_disk_speed_and_cancel():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_replica_log_dirs(2, [("/d2", "t", 0)])
    m.advance_by(1)
    assert m.partition("t", 0).replica(2).future_size_bytes == 500 * MB  # default disk speed 500 MB/s
    m.alter_replica_log_dirs(2, [("/d1", "t", 0)])  # back to the current dir: the copy stops
    assert m.partition("t", 0).replica(2).future_log_dir is None
    m.advance_by(10)
    assert m.partition("t", 0).replica(2).log_dir == "/d1"


def test_restarted_broker_catches_up_throttled_only_if_listed():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB, bytes_in=10 * MB)]))
    m.stop_broker(3)
    m.advance_by(100)  # broker 3 misses 1 GB
    throttle(m, [1, 2, 3], 5 * MB, leader="0:1", follower="0:3")
    m.start_broker(3)
    st = m.partition_state("t", 0)
    assert st["isr"] == [1, 2]
    # catching up at 5 MB/s while the log grows at 10 MB/s never ends; lift the throttle
    m.advance_by(50)
    assert 3 not in m.partition_state("t", 0)["isr"]
    m.incremental_alter_configs(2, "t", [("leader.replication.throttled.replicas", DELETE, None),
                                         ("follower.replication.throttled.replicas", DELETE, None)])
    took = run_until(m, lambda: 3 in m.partition_state("t", 0)["isr"], step=0.05)
    assert took > 100


def test_scaled_real_time_with_injected_clock():
    from kafka_sim.model import ClusterModel

    wall = [100.0]
    m = ClusterModel(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]), time_scale=100.0,
                     clock=lambda: wall[0])
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    wall[0] += 0.04  # 4 simulated seconds
    m.advance()
    assert abs(m.now() - 4.0) < 1e-9 and m.partition_state("t", 0)["sizes"][4] == 500 * MB
    wall[0] += 0.05
    m.advance()
    assert done(m, "t", 0)() and m.partition_state("t", 0)["leader"] == 4


def _walked_usage(m, broker):
    """Every dir's bytes by walking the broker's replicas: what DirUsage must always equal."""
    used = {}
    for p in m._by_broker[broker]:
        r = p._reps[broker]
        used[r.log_dir] = used.get(r.log_dir, 0.0) + r.exact_bytes()
        if r.future_log_dir is not None:
            used[r.future_log_dir] = used.get(r.future_log_dir, 0.0) + r.future_bytes
    return used


def test_dir_usage_kept_per_broker_equals_a_walk_of_its_replicas_through_moves_and_faults():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3], [2, 3, 4], [3, 4, 5]], size=GB, bytes_in=3 * MB),
                                topic("u", [[4, 5, 6], [5, 6, 1]], size=2 * GB)]))
    throttle(m, range(1, 7), 20 * MB)

    def check():
        for b in range(1, 7):
            cached, walked = m.dir_used_bytes(b), _walked_usage(m, b)
            for d in set(cached) | set(walked):
                assert abs(cached.get(d, 0.0) - walked.get(d, 0.0)) < 1.0, (b, d, cached, walked, m._t)

    check()
    m.alter_reassignments([("t", 0, [4, 5, 6]), ("u", 1, [5, 6, 2])])
    m.incremental_alter_configs(4, "3", [("replica.alter.log.dirs.io.max.bytes.per.second", SET, str(20 * MB))])
    m.alter_replica_log_dirs(3, [("/d2", "t", 1)])  # 1 GB at 20 MB/s: still copying when cancelled
    for when in range(40):
        m.advance_by(7.5)
        check()
        if when == 5:
            m.stop_broker(2)
        if when == 9:
            m.start_broker(2)
        if when == 12:
            m.alter_reassignments([("t", 0, None)])  # cancel: the added replicas go
        if when == 3:
            assert m.partition("t", 1).replica(3).future_bytes > 0
            m.alter_replica_log_dirs(3, [("/d1", "t", 1)])  # back home stops the copy
        if when == 15:
            m.alter_replica_log_dirs(4, [("/d2", "u", 0)])
        if when == 20:
            m.elect_leaders(0, [("t", 2)])
        if when == 25:  # real records: the log jumps by their bytes
            leader = m.partition_state("u", 0)["leader"]
            assert m.append(leader, "u", 0, batch([b"x" * 5000] * 20), 20, 1)[0] == E.NONE
    assert m.partition_state("u", 1)["replicas"] == [5, 6, 2]
    check()


def test_fetch_of_large_batches_counts_a_whole_fetch_in_the_quotas():
    # LocalLog.read slices replica.fetch.max.bytes (1 MiB) from the segment, so a fetch of
    # 0.9 MB batches brings one whole batch and a partial one; both quotas record the whole
    # response (KafkaApis sizeOfThrottledPartitions, ReplicaFetcherThread.processPartitionData).
    # Kafka 4.3.1 moved such a log at about 1.72 MB/s under a 2 MB/s throttle (calibration).
    snap = snapshot(topics=[topic("t", [[1, 2, 3]], size=200 * MB)])
    snap["topics"][0]["partitions"][0]["batch_bytes"] = 900_000
    m = manual(snap)
    throttle(m, [1, 2, 3, 4], 2 * MB, leader="0:1,0:2,0:3", follower="0:4")
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    took = run_until(m, done(m, "t", 0), step=0.1)
    expected = 200 * MB * (1048576 / 900_000) / (2 * MB)
    assert abs(took - expected) / expected < 0.02, (took, expected)
