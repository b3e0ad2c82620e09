"""ClusterModel ISR, failover, produce/fetch and elections, in manual simulated time."""
from __future__ import annotations

from kafka_sim import errors as E

from test_sim_model_helpers import GB, MB, batch, decode, done, manual, run_until, snapshot, topic

SET = 0


def test_isr_shrinks_on_stop_leader_fails_over_and_broker_recovers():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB, bytes_in=10 * MB)]))
    v0 = m.metadata_version
    m.stop_broker(1)
    st = m.partition_state("t", 0)
    assert st["isr"] == [2, 3] and st["leader"] == 2 and st["leader_epoch"] == 1 and st["offline"] == [1]
    assert m.metadata_version > v0
    m.advance_by(30)
    st = m.partition_state("t", 0)
    assert st["sizes"][1] == GB and st["sizes"][2] == GB + 300 * MB  # the log kept growing on the new leader
    m.start_broker(1)
    assert m.partition_state("t", 0)["isr"] == [2, 3]
    # 300 MB behind at 125 MB/s while the log grows 10 MB/s; leader 2 also feeds broker 3
    took = run_until(m, lambda: 1 in m.partition_state("t", 0)["isr"], step=0.05)
    assert 2 < took - 30 < 4
    st = m.partition_state("t", 0)
    assert st["leader"] == 2 and st["sizes"][1] == st["sizes"][2]


def test_last_isr_member_keeps_partition_offline_until_it_returns():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    for b in (1, 2, 3):
        m.stop_broker(b)
    st = m.partition_state("t", 0)
    assert st["leader"] == -1 and st["isr"] == [3] and st["offline"] == [1, 2, 3]
    m.start_broker(1)  # not in the ISR: no unclean election
    assert m.partition_state("t", 0)["leader"] == -1
    m.start_broker(3)
    st = m.partition_state("t", 0)
    assert st["leader"] == 3
    run_until(m, lambda: len(m.partition_state("t", 0)["isr"]) == 2)
    m.start_broker(2)
    run_until(m, lambda: len(m.partition_state("t", 0)["isr"]) == 3)


def test_acks_all_refused_below_min_isr_and_min_isr_above_rf_allowed():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=0, configs={"min.insync.replicas": "2"})]))
    assert m.append(1, "t", 0, batch([b"a"]), 1, -1)[0] == E.NONE
    m.stop_broker(2)
    assert m.append(1, "t", 0, batch([b"b"]), 1, -1)[0] == E.NONE  # ISR [1,3] still >= 2
    m.stop_broker(3)
    assert m.append(1, "t", 0, batch([b"c"]), 1, -1) == (E.NOT_ENOUGH_REPLICAS, -1, -1)
    assert m.append(1, "t", 0, batch([b"c"]), 1, 1)[0] == E.NONE  # acks=1 does not check
    # min.insync.replicas larger than the replication factor is accepted, produce then fails
    m.start_broker(2)
    m.start_broker(3)
    m.advance_by(1)
    assert m.incremental_alter_configs(2, "t", [("min.insync.replicas", SET, "4")]) == (E.NONE, None)
    assert m.append(1, "t", 0, batch([b"d"]), 1, -1)[0] == E.NOT_ENOUGH_REPLICAS
    assert m.min_insync_replicas("t") == 4


def test_produce_only_on_leader_and_read_back_from_any_offset():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=0)]))
    assert m.append(2, "t", 0, batch([b"x"]), 1, 1) == (E.NOT_LEADER_OR_FOLLOWER, -1, -1)
    assert m.append(1, "nope", 0, batch([b"x"]), 1, 1)[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert m.append(1, "t", 0, b"garbage", 1, 1)[0] == E.CORRUPT_MESSAGE
    assert m.append(1, "t", 0, batch([b"a", b"b", b"c"]), 3, -1) == (E.NONE, 0, 3)
    assert m.append(1, "t", 0, batch([b"d", b"e"]), 2, -1) == (E.NONE, 3, 5)
    assert m.high_watermark("t", 0) == 5
    code, hw, start, records = m.read(1, "t", 0, 0, 1 << 20)
    assert (code, hw, start) == (E.NONE, 5, 0)
    assert decode(records) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    # from an offset inside the first batch: that whole batch comes back (Kafka semantics)
    assert [o for o, _v in decode(m.read(1, "t", 0, 1, 1 << 20)[3])] == [0, 1, 2, 3, 4]
    assert decode(m.read(1, "t", 0, 3, 1 << 20)[3]) == [(3, b"d"), (4, b"e")]
    # max_bytes smaller than a batch still returns one batch
    assert [o for o, _v in decode(m.read(1, "t", 0, 0, 1)[3])] == [0, 1, 2]
    assert m.read(1, "t", 0, 5, 1 << 20)[3] == b""
    assert m.read(1, "t", 0, 6, 1 << 20)[0] == E.OFFSET_OUT_OF_RANGE
    assert m.read(2, "t", 0, 0, 1 << 20)[0] == E.NOT_LEADER_OR_FOLLOWER
    assert m.list_offsets(1, "t", 0, -1) == (E.NONE, -1, 5, 0)
    assert m.list_offsets(1, "t", 0, -2) == (E.NONE, -1, 0, 0)
    assert m.list_offsets(1, "t", 0, 1_001)[2] == 0  # first batch holds timestamps 1000..1002
    assert m.list_offsets(3, "t", 0, -1)[0] == E.NOT_LEADER_OR_FOLLOWER
    assert m.writes.total() == 0  # produce is not an admin write


def test_acked_records_survive_failover_and_reassignment():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=100 * MB)]))
    acked = []
    for i in range(5):
        code, base, end = m.append(1, "t", 0, batch([b"r%d" % i]), 1, -1)
        assert code == E.NONE and m.high_watermark("t", 0) >= end
        acked.append(base)
    m.alter_reassignments([("t", 0, [4, 5, 6])])
    n = 5
    while not done(m, "t", 0)():
        leader = m.partition_state("t", 0)["leader"]
        code, base, end = m.append(leader, "t", 0, batch([b"r%d" % n]), 1, -1)
        assert code == E.NONE
        acked.append(base)
        n += 1
        m.advance_by(0.1)
    st = m.partition_state("t", 0)
    assert st["leader"] == 4
    # the new replicas hold every record: fail the new leader over twice and read all back
    m.stop_broker(4)
    m.stop_broker(5)
    assert m.partition_state("t", 0)["leader"] == 6
    got = decode(m.read(6, "t", 0, 0, 1 << 30)[3])
    assert [o for o, _v in got] == acked == list(range(n))
    assert [v for _o, v in got] == [b"r%d" % i for i in range(n)]


def test_lagging_follower_offsets_follow_its_bytes():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=0)]))
    m.stop_broker(3)
    for i in range(10):
        m.append(1, "t", 0, batch([b"x" * 1000]), 1, -1)
    assert m.partition_state("t", 0)["log_end_offsets"][3] == 0
    assert m.high_watermark("t", 0) == 10  # broker 3 is out of the ISR
    m.start_broker(3)
    m.advance_by(1)
    st = m.partition_state("t", 0)
    assert st["log_end_offsets"][3] == 10 and st["isr"] == [1, 2, 3]


def test_preferred_leader_election():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3], [2, 3, 1]], size=MB, bytes_in=MB)]))
    res = m.elect_leaders(0, [("t", 0), ("t", 9)])
    assert [r[2] for r in res] == [E.ELECTION_NOT_NEEDED, E.UNKNOWN_TOPIC_OR_PARTITION]
    m.stop_broker(1)
    assert m.partition_state("t", 0)["leader"] == 2
    assert m.elect_leaders(0, [("t", 0)])[0][2] == E.PREFERRED_LEADER_NOT_AVAILABLE
    m.advance_by(100)
    m.start_broker(1)
    # 100 MB behind, not yet back in the ISR: still not available
    assert m.elect_leaders(0, [("t", 0)])[0][2] == E.PREFERRED_LEADER_NOT_AVAILABLE
    m.advance_by(2)
    before = m.write_count
    assert m.elect_leaders(0, None) == [("t", 0, E.NONE, None)]
    st = m.partition_state("t", 0)
    assert st["leader"] == 1 and st["leader_epoch"] == 2
    assert m.write_count == before + 1 and m.writes["ElectLeaders"] == 1


def test_isr_member_lagging_past_replica_lag_time_is_removed():
    # a follower in the ISR that stops being caught up (here: its leader moved to a replica with
    # a shorter log is impossible, so force it) leaves after replica.lag.time.max.ms
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB, bytes_in=10 * MB)],
                        broker_configs={b: {"replica.lag.time.max.ms": "5000"} for b in range(1, 7)}))
    p = m.partition("t", 0)
    with m.lock:
        m._materialize(p, p.replica(3))
        p.replica(3)._bytes -= 600 * MB  # broker 3 fell behind while still listed in the ISR
        m._touch(p)
    m.incremental_alter_configs(4, "3", [("follower.replication.throttled.rate", SET, "1000")])
    m.incremental_alter_configs(2, "t", [("follower.replication.throttled.replicas", SET, "0:3")])
    # in the ISR it is not throttled, but 600 MB at (125 - 10) - 10 = 105 MB/s net takes 5.7 s > 5 s
    m.advance_by(4.9)
    assert 3 in m.partition_state("t", 0)["isr"]
    m.advance_by(0.2)
    st = m.partition_state("t", 0)
    assert st["isr"] == [1, 2] and st["leader"] == 1
    # out of the ISR the 1000 B/s throttle now applies and it cannot catch up
    m.advance_by(60)
    assert m.partition_state("t", 0)["isr"] == [1, 2]


def test_produce_during_move_delays_completion_by_the_added_bytes():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    m.advance_by(4)  # half way at 125 MB/s
    payload = batch([b"z" * 100_000] * 5)
    for _ in range(50):
        assert m.append(1, "t", 0, payload, 5, 1)[0] == E.NONE
    total = 50 * len(payload)
    took = run_until(m, done(m, "t", 0), step=0.01)
    assert abs(took - (GB + total) / 125e6) < 0.02
    st = m.partition_state("t", 0)
    assert st["log_end_offsets"][4] == 250 and st["sizes"][4] == st["size_bytes"]
