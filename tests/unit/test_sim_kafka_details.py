"""Smaller behaviours the simulator takes from apache/kafka, each citing its source."""
from __future__ import annotations

from test_sim_model_helpers import GB, MB, manual, snapshot, topic


def test_auto_preferred_leader_election_after_the_check_interval():
    # QuorumController.maybeScheduleNextBalancePartitionLeaders runs
    # ReplicationControlManager.maybeBalancePartitionLeaders every
    # leader.imbalance.check.interval.seconds while auto.leader.rebalance.enable (default true)
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=0)],
                        broker_configs={b: {"leader.imbalance.check.interval.seconds": "60"} for b in range(1, 7)}))
    m.stop_broker(1)
    m.start_broker(1)
    assert m.partition_state("t", 0)["leader"] == 2  # back in the ISR, not leader yet
    m.advance_by(59)
    assert m.partition_state("t", 0)["leader"] == 2
    m.advance_by(2)
    assert m.partition_state("t", 0)["leader"] == 1


def test_auto_preferred_leader_election_can_be_turned_off():
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=0)],
                        broker_configs={b: {"auto.leader.rebalance.enable": "false"} for b in range(1, 7)}))
    m.stop_broker(1)
    m.start_broker(1)
    m.advance_by(3600)
    assert m.partition_state("t", 0)["leader"] == 2


def test_preferred_leader_waits_until_it_is_in_sync():
    # PartitionChangeBuilder.electPreferredLeader: the first replica only if it is in the ISR
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB, bytes_in=MB)]))
    m.stop_broker(1)
    m.advance_by(100)  # 1 falls 100 MB behind
    m.start_broker(1)
    m.set_network(1, 1.05 * MB)  # catches up at 0.05 MB/s: ~2000 s
    m.advance_by(400)
    st = m.partition_state("t", 0)
    assert 1 not in st["isr"] and st["leader"] == 2
    m.set_network(1, 125 * MB)
    m.advance_by(301)
    assert m.partition_state("t", 0)["leader"] == 1


def test_controller_id_is_a_random_live_broker():
    # KRaftMetadataCache.getControllerId: a random alive broker per request (KIP-590)
    m = manual(snapshot(topics=[]))
    m.stop_broker(6)
    seen = {m.controller_id for _ in range(200)}
    assert seen == {1, 2, 3, 4, 5}


def test_follower_behind_reports_zero_offset_lag():
    # ReplicaManager.getLogEndOffsetLag uses the local high watermark, which a follower caps
    # at its own log end (UnifiedLog.updateHighWatermark): offset lag 0 even far behind
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB, bytes_in=2 * MB)]))
    m.set_network(3, 1 * MB)
    m.advance_by(60)
    st = m.partition_state("t", 0)
    assert st["sizes"][1] - st["sizes"][3] > 50 * MB
    rows = [p for d in m.describe_log_dirs(3) for _t, parts in d[4] for p in parts]
    assert rows and all(lag == 0 for _i, _size, lag, _future in rows)


def test_new_replica_goes_to_the_log_dir_with_fewest_logs():
    # LogManager.nextLogDirs: count the logs (current and future) of each dir, take the fewest,
    # whatever their sizes
    m = manual(snapshot(topics=[topic("big", [[4, 2, 3]], size=500 * GB),
                                topic("small", [[1, 2, 3], [1, 2, 3], [1, 2, 3]], size=1)]))
    m.alter_replica_log_dirs(4, [("/d1", "big", 0)])
    assert m.partition_state("big", 0)["log_dirs"][4] == "/d1"
    m.alter_reassignments([("small", 0, [4, 2, 3])])
    m.alter_reassignments([("small", 1, [4, 2, 3])])
    m.alter_reassignments([("small", 2, [4, 2, 3])])
    dirs = [m.partition_state("small", i)["log_dirs"][4] for i in range(3)]
    assert dirs == ["/d2", "/d1", "/d2"]  # the huge /d1 log counts as one
