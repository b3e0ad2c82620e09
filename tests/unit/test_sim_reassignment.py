"""KIP-455 as KRaft's ReplicationControlManager runs it (apache/kafka metadata module)."""
from __future__ import annotations

from kafka_sim import errors as E
from kafka_sim.reassignment import change_reassignment, completed, merge_target, revert

from test_sim_model_helpers import GB, manual, run_until, snapshot, topic


def test_merge_target_matches_partition_reassignment_replicas():
    # PartitionReassignmentReplicas: adding/removing are sorted sets against the current
    # full replica list, replicas = target + removing
    assert merge_target([3, 2, 1], [4, 5, 1]) == ([4, 5, 1, 2, 3], [4, 5], [2, 3])
    assert merge_target([4, 5, 6, 1, 2, 3], [1, 2, 7]) == ([1, 2, 7, 3, 4, 5, 6], [7], [3, 4, 5, 6])
    # changePartitionReassignment only sets non-empty lists: the same target again keeps adding
    assert change_reassignment([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]) == (
        [4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    # PartitionReassignmentRevert: replicas - adding, ISR - adding (unclean when empty)
    assert revert([1, 2, 7, 3, 4, 5, 6], [7], [1, 2]) == ([1, 2, 3, 4, 5, 6], [1, 2], False)
    assert revert([3, 4, 1, 2], [3, 4], [3]) == ([1, 2], [1], True)


def test_new_target_on_ongoing_reassignment_is_merged_and_cancel_keeps_earlier_additions():
    # ReplicationControlManager.changePartitionReassignment on [1,2,3] -> [4,5,6] -> [1,2,7]
    m = manual(snapshot(brokers=7, topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_reassignments([("t", 0, [4, 5, 6])])
    assert m.list_reassignments() == [("t", 0, [4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])]
    m.advance_by(1)
    assert m.alter_reassignments([("t", 0, [1, 2, 7])]) == [("t", 0, E.NONE, None)]
    assert m.list_reassignments() == [("t", 0, [1, 2, 7, 3, 4, 5, 6], [7], [3, 4, 5, 6])]
    assert m.alter_reassignments([("t", 0, None)]) == [("t", 0, E.NONE, None)]
    st = m.partition_state("t", 0)
    assert st["replicas"] == [1, 2, 3, 4, 5, 6] and not st["adding"] and st["leader"] == 1


def test_replica_order_follows_sorted_sets():
    m = manual(snapshot(topics=[topic("t", [[3, 2, 1]], size=GB)]))
    m.alter_reassignments([("t", 0, [4, 5, 1])])
    st = m.partition_state("t", 0)
    assert st["replicas"] == [4, 5, 1, 2, 3] and st["adding"] == [4, 5] and st["removing"] == [2, 3]
    m.alter_reassignments([("t", 0, None)])
    assert m.partition_state("t", 0)["replicas"] == [1, 2, 3]


def _only_adding_in_sync(configs=None):
    """[1,2] -> [3,4]: 3 has caught up, 4 is down, then 1 and 2 stop: the ISR is [3]."""
    m = manual(snapshot(topics=[topic("t", [[1, 2]], size=GB, configs=configs)]))
    m.stop_broker(4)
    m.alter_reassignments([("t", 0, [3, 4])])
    m.advance_by(60)
    assert 3 in m.partition_state("t", 0)["isr"]
    m.stop_broker(1)
    m.stop_broker(2)
    st = m.partition_state("t", 0)
    assert st["isr"] == [3] and st["leader"] == 3 and st["adding"] == [3, 4]
    return m


def test_cancel_refused_when_only_adding_replicas_are_in_sync():
    # PartitionReassignmentRevert marks the revert unclean; cancelPartitionReassignment
    # refuses it with INVALID_REPLICA_ASSIGNMENT (39) and the partition keeps its leader
    m = _only_adding_in_sync()
    (_t, _p, code, msg), = m.alter_reassignments([("t", 0, None)])
    assert code == E.INVALID_REPLICA_ASSIGNMENT == 39 and "unclean leader election" in msg
    st = m.partition_state("t", 0)
    assert st["leader"] == 3 and st["adding"] == [3, 4] and st["replicas"] == [3, 4, 1, 2]


def test_cancel_with_unclean_election_enabled_reverts_to_first_original():
    m = _only_adding_in_sync({"unclean.leader.election.enable": "true"})
    assert m.alter_reassignments([("t", 0, None)])[0][2] == E.NONE
    st = m.partition_state("t", 0)
    assert st["replicas"] == [1, 2] and st["isr"] == [1] and st["leader"] == -1  # 1 is down
    m.start_broker(1)
    assert m.partition_state("t", 0)["leader"] == 1


def test_completion_needs_the_adding_replicas_in_sync_and_all_staying_ones_only_when_shrinking():
    # Kafka 4.3.1 PartitionReassignmentReplicas.maybeCompleteReassignment (kafka-metadata jar):
    # the ISR minus removing must hold every adding replica; every staying replica only when
    # fewer replicas are added than removed
    assert completed([4, 2, 3, 1], [4], [1], [1, 3, 4]) == ([4, 2, 3], [3, 4])  # 2 out of sync: done
    assert completed([4, 2, 3, 1], [4], [1], [1, 2, 3]) is None
    assert completed([1, 2, 3], [], [3], [1, 3]) is None  # 3 -> 2 replicas: 2 must be in sync
    assert completed([1, 2, 3], [], [3], [1, 2, 3]) == ([1, 2], [1, 2])
    # a replica both adding and removing is never in "ISR minus removing": never complete
    assert completed([1, 2, 3, 4], [4], [4], [1, 2, 3, 4]) is None


def test_original_target_mid_move_stays_listed_until_cancelled():
    # Seen on Kafka 4.3.1 (benchmarks/calibration_states.py, "original target mid-move"):
    # [1,2,3] -> [4,2,3], then [1,2,3] again: replicas [1,2,3,4], adding [4], removing [4];
    # 4 keeps copying and joins the ISR but the reassignment never completes; a cancel ends it
    m = manual(snapshot(topics=[topic("t", [[1, 2, 3]], size=GB)]))
    m.alter_reassignments([("t", 0, [4, 2, 3])])
    m.advance_by(0.1)
    assert m.alter_reassignments([("t", 0, [1, 2, 3])]) == [("t", 0, E.NONE, None)]
    assert m.list_reassignments() == [("t", 0, [1, 2, 3, 4], [4], [4])]
    run_until(m, lambda: 4 in m.partition_state("t", 0)["isr"], step=1.0)
    m.advance_by(5)
    assert m.list_reassignments() == [("t", 0, [1, 2, 3, 4], [4], [4])]
    assert m.alter_reassignments([("t", 0, None)]) == [("t", 0, E.NONE, None)]
    st = m.partition_state("t", 0)
    assert (st["replicas"], st["isr"], st["leader"], m.list_reassignments()) == ([1, 2, 3], [1, 2, 3], 1, [])
