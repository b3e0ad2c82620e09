"""DescribeLogDirs and the change tracking's per-partition shares, against answers derived
from the replicas directly (both are written for speed; these references are written for reading)."""
from __future__ import annotations

from kafka_sim.replication_quotas import FOLLOWER_QUOTA, LEADER_QUOTA
from kafka_sim.state import is_throttled

from test_sim_model_helpers import GB, MB, manual, snapshot, topic

SET = 0


def _reference_dirs(m, broker_id, topics=None):
    """DescribeLogDirs of one broker, from each replica's own accessors."""
    broker = m.brokers[broker_id]
    if topics is None:
        chosen = list(m._by_broker[broker_id])
    else:
        chosen = []
        for name, indices in topics:
            for i in indices:
                p = m._part(name, i)
                if p is not None and broker_id in p._reps and p not in chosen:
                    chosen.append(p)
    rows = {d.path: {} for d in broker.log_dirs}
    for p in chosen:
        r = p._reps[broker_id]
        rows[r.log_dir].setdefault(p.topic, []).append((p.index, int(r.exact_bytes()), 0, False))
        if r.future_log_dir is not None:
            lag = max(0, r.log_end_offset - r.future_log_end_offset)
            rows[r.future_log_dir].setdefault(p.topic, []).append((p.index, int(r.future_bytes), lag, True))
    used = m.dir_used_bytes(broker_id)
    return [(d.path, 0, int(d.capacity_bytes), int(max(0.0, d.capacity_bytes - used.get(d.path, 0.0))),
             [(t, sorted(parts)) for t, parts in sorted(rows[d.path].items())]) for d in broker.log_dirs]


def _reference_shares(m, p):
    """A partition's steady shares (broker, out, in, leader rec, follower rec), followers first."""
    t = m.topics[p.topic]
    leader_up = p.leader >= 0 and m.brokers[p.leader].alive
    rate = p._rate
    shares = [(b, 0.0, rate, 0.0, rate if is_throttled(t.follower_throttled, p.index, b) else 0.0)
              for b in p.replicas if b != p.leader and p._reps[b].tracking and m.brokers[b].alive
              and leader_up and rate > 0]
    if leader_up and rate > 0:
        n = len(shares)
        lrec = rate * n if is_throttled(t.leader_throttled, p.index, p.leader) else 0.0
        shares.append((p.leader, rate * n, rate, lrec, 0.0))
    return tuple(shares)


def _model():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 6]], size=GB, bytes_in=2 * MB),
                                topic("a", [[5, 6, 1], [6, 1, 2]], size=GB, bytes_in=MB)]))
    for b in range(1, 7):
        m.incremental_alter_configs(4, str(b), [("leader.replication.throttled.rate", SET, str(30 * MB)),
                                                ("follower.replication.throttled.rate", SET, str(30 * MB)),
                                                ("replica.alter.log.dirs.io.max.bytes.per.second", SET, str(10 * MB))])
    m.incremental_alter_configs(2, "t", [("leader.replication.throttled.replicas", SET, "0:1,0:2,1:2"),
                                         ("follower.replication.throttled.replicas", SET, "0:4,0:5,1:5")])
    return m


def test_describe_log_dirs_equals_a_walk_of_the_replicas_through_moves():
    m = _model()
    asks = [("t", [3, 0, 1, 0, 9]), ("nope", [0]), ("a", [1, 0])]  # a repeat, a missing index and topic

    def check():
        for b in range(1, 7):
            assert m.describe_log_dirs(b) == _reference_dirs(m, b)
            assert m.describe_log_dirs(b, asks) == _reference_dirs(m, b, asks)

    check()
    m.alter_reassignments([("t", 0, [4, 5, 6]), ("a", 1, [6, 1, 3])])
    m.alter_replica_log_dirs(3, [("/d2", "t", 2)])  # a future replica in the other dir
    m.alter_replica_log_dirs(1, [("/d2", "a", 0)])
    answers, futures = set(), 0
    for _ in range(30):
        m.advance_by(5.0)
        check()
        answers.add(repr(m.describe_log_dirs(3, asks)))
        futures += sum(row[3] for d in m.describe_log_dirs(1) for _t, parts in d[4] for row in parts)
    assert len(answers) > 5  # the answers moved with the copies: the check saw changing states
    assert futures > 0  # and future replicas were reported among them


def test_tracked_shares_equal_the_partitions_own_after_every_change():
    m = _model()

    def check():
        for t in m.topics.values():
            for p in t.partitions:
                assert m._contrib.get(p, ()) == _reference_shares(m, p), p
        for b in range(1, 7):
            shares = [s for c in m._contrib.values() for s in c if s[0] == b]
            assert abs(m._steady_out.get(b, 0.0) - sum(s[1] for s in shares)) < 1e-3
            assert abs(m._steady_in.get(b, 0.0) - sum(s[2] for s in shares)) < 1e-3
            for key, i in (((LEADER_QUOTA, b), 3), ((FOLLOWER_QUOTA, b), 4)):
                assert abs(m._steady_rec.get(key, 0.0) - sum(s[i] for s in shares)) < 1e-3

    m.advance_by(1.0)
    check()
    m.alter_reassignments([("t", 0, [4, 5, 6]), ("t", 1, [2, 5, 6])])
    # a stopped broker, its return, then throttles changed: the shares' recordings follow each
    changes = {4: lambda: m.stop_broker(2), 9: lambda: m.start_broker(2),
               12: lambda: m.incremental_alter_configs(2, "t", [("leader.replication.throttled.replicas", SET, "*")])}
    for when in range(40):
        m.advance_by(4.0)
        check()
        if when in changes:
            changes[when]()
    assert m.partition_state("t", 0)["replicas"] == [4, 5, 6]
    assert any(s[3] for c in m._contrib.values() for s in c)  # leader recordings were exercised
