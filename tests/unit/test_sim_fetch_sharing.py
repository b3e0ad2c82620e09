"""A saturated link is shared per partition between in-sync followers and moves (kafka_sim.replication_sharing).

Kafka's follower fetch carries in-sync and reassigning partitions alike, each up to
replica.fetch.max.bytes, in an order the fetch session rotates: no priority for the ISR. So
moves through a saturated link leave an in-sync follower less than its write rate once there
are enough of them; below that point the sharing is what it was (in-sync traffic fits).
"""
from __future__ import annotations

from kafka_sim import errors as E
from test_sim_model_helpers import MB, batch, done, manual, run_until, snapshot, topic


def moves_into_3(count: int, size: float = 60 * MB):
    """Broker 3 follows ``a`` (1 MB/s) over a 4 MB/s link; ``count`` moves add a replica on broker 3."""
    m = manual(snapshot(topics=[topic("a", [[1, 3]], size=100 * MB, bytes_in=1 * MB),
                                topic("m", [[2, 4]] * count, size=size)]))
    m.set_network(3, 4 * MB)
    assert [code for *_x, code, _msg in m.alter_reassignments([("m", p, [2, 3]) for p in range(count)])] == [0] * count
    return m


def test_moves_under_the_fair_level_leave_the_in_sync_follower_its_write_rate():
    m = moves_into_3(2)
    m.advance_by(10)
    # (4 - 1) / 2 = 1.5 MB/s per move is above a's 1 MB/s: a keeps up, the moves share the rest
    a = m.partition_state("a", 0)
    assert a["isr"] == [1, 3] and a["sizes"][3] == a["size_bytes"]
    assert abs(m.partition_state("m", 0)["sizes"][3] - 15 * MB) < 0.1 * MB
    run_until(m, lambda: done(m, "m", 0)() and done(m, "m", 1)(), step=0.5)
    assert m.partition_state("a", 0)["isr"] == [1, 3]


def test_enough_moves_into_a_saturated_link_push_an_in_sync_follower_out_of_the_isr():
    m = moves_into_3(4)
    m.advance_by(10)
    # 4 MB/s over five partitions: 0.8 MB/s each, the in-sync follower included (not 1 MB/s first)
    a = m.partition_state("a", 0)
    assert abs((a["size_bytes"] - a["sizes"][3]) - 2 * MB) < 0.1 * MB, a
    assert abs(m.partition_state("m", 0)["sizes"][3] - 8 * MB) < 0.1 * MB
    left = run_until(m, lambda: 3 not in m.partition_state("a", 0)["isr"], step=0.5)
    assert 30 <= left <= 45.5, left  # replica.lag.time.max.ms, checked every half of it
    # the moves finish (60 MB at 0.8 MB/s), then the link carries a's follower again: it rejoins
    back = run_until(m, lambda: 3 in m.partition_state("a", 0)["isr"], step=0.5)
    assert 75 < back < 100, back
    assert all(done(m, "m", p)() for p in range(4))


def test_moves_out_of_a_slow_leader_push_both_followers_out():
    # broker 1 leads ``a`` (1 MB/s, followers 2 and 3) over a 4 MB/s link; three moves read from it
    m = manual(snapshot(topics=[topic("a", [[1, 2, 3]], size=100 * MB, bytes_in=1 * MB),
                                topic("m", [[1, 5]] * 3, size=100 * MB)]))
    m.set_network(1, 4 * MB)
    m.alter_reassignments([("m", p, [1, 4]) for p in range(3)])
    run_until(m, lambda: m.partition_state("a", 0)["isr"] == [1], step=0.5, limit=60)
    # with none of the moves, the same link keeps both followers in sync
    quiet = manual(snapshot(topics=[topic("a", [[1, 2, 3]], size=100 * MB, bytes_in=1 * MB)]))
    quiet.set_network(1, 4 * MB)
    quiet.advance_by(60)
    assert quiet.partition_state("a", 0)["isr"] == [1, 2, 3]


def test_moves_squeeze_a_follower_of_records_produced_through_the_api():
    # as above, but ``a``'s 1 MB/s arrives as Produce requests (lumps), not as a simulated write
    # rate: the follower's share of the link beside four moves (0.8 MB/s) is still below it.
    # Real Kafka 4.3.1 (calibration h): such a follower left the ISR after 36 s.
    m = manual(snapshot(topics=[topic("a", [[1, 3]], size=10 * MB),
                                topic("m", [[2, 4]] * 4, size=60 * MB)]))
    m.set_network(3, 4 * MB)
    m.alter_reassignments([("m", p, [2, 3]) for p in range(4)])
    record = batch([b"x" * 99_000])
    left = None
    for tick in range(600):  # 100 kB every 0.1 s for 60 s
        assert m.append(1, "a", 0, record, 1, 1)[0] == E.NONE
        m.advance_by(0.1)
        if 3 not in m.partition_state("a", 0)["isr"]:
            left = tick / 10
            break
    assert left is not None and 30 <= left <= 46, left
