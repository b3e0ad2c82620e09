"""The estimate of a plan the planner holds: plain data in, :mod:`.estimate`'s figures out.

The planner has no cluster connection, only what the snapshot said of each moving partition
(:class:`PlannedMove`). :func:`estimate_plan` makes the cluster state the executor would read
from it, the executor's own KIP-435 steps and their loads, and ends in
:func:`~.estimate.estimate_loads` as the dry run does, so a plan's summary and its dry run show
one figure. A big plan's steps are made in two processes (:mod:`.forked`): the same steps, in
the same order, so the same figure.
"""
from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple, Sequence

from kafka_reassign.cluster.state import ClusterState, TopicPartition
from kafka_reassign.planning.estimate import (Estimate, Limits, StallPoint, StepLoad, estimate_loads, quota_load,
                                              stall_points, step_loads)
from kafka_reassign.planning.forked import fork_map, processes_for


class PlannedMove(NamedTuple):
    """One partition move as the planner holds it: plain data, no cluster connection (a tuple: a
    million are made at 3M replicas).

    :param topic: topic name
    :param partition: partition index
    :param current: replicas now, preferred leader first
    :param target: replicas after the move
    :param size_bytes: the partition's local size: what each new replica copies
    :param produce: bytes/s written to it (0 when unknown)
    :param leader: current leader (-1 or not a current replica: the first in-sync one)
    :param offline: current replicas on dead brokers (not in sync)
    :param min_isr: the topic's min.insync.replicas (shapes the KIP-435 steps)
    :param current_dirs: log dir of each current replica (empty: unknown)
    :param log_dirs: the plan's log dir per target replica (``any`` or a path; None: no preference)
    """

    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]
    size_bytes: float
    produce: float = 0.0
    leader: int = -1
    offline: tuple[int, ...] = ()
    min_isr: int = 1
    current_dirs: tuple[str, ...] = ()
    log_dirs: tuple[str, ...] | None = None
    remote_bytes: float = 0.0  # bytes in remote storage (tiered topic): stay there, not copied


def latest_moves(moves: Iterable[PlannedMove]) -> dict[TopicPartition, PlannedMove]:
    """Each partition's move as the cluster state has it: a later move of a partition replaces an
    earlier one (partitions in the order first named)."""
    return {(m.topic, m.partition): m for m in moves}


def planned_state(moves: Sequence[PlannedMove]) -> ClusterState:
    """The moving partitions as the executor would read them from the cluster."""
    from kafka_reassign.cluster.state import BrokerInfo, PartitionInfo, TopicInfo
    topics: dict[str, TopicInfo] = {}
    brokers: dict[int, BrokerInfo] = {}
    for m in moves:  # brokers named by any move, even one a later move of its partition replaces
        for b in (*m.current, *m.target):
            brokers[b] = brokers[b] if b in brokers else BrokerInfo(id=b, alive=b not in m.offline)
    for m in latest_moves(moves).values():
        isr = tuple(b for b in m.current if b not in m.offline) if m.offline else m.current
        info = PartitionInfo(m.topic, m.partition, m.current, isr, m.leader if m.leader in m.current else
                             (isr[0] if isr else -1), m.offline, int(m.size_bytes), m.produce,
                             dict(zip(m.current, m.current_dirs)), int(m.remote_bytes))
        # A topic is made when first named, not once per move.
        if m.topic not in topics:
            topics[m.topic] = TopicInfo(name=m.topic, partitions={}, configs={"min.insync.replicas": str(m.min_isr)})
        topics[m.topic].partitions[m.partition] = info
    return ClusterState(brokers=brokers, topics=topics)


def move_loads(moves: Sequence[PlannedMove], first: Mapping[TopicPartition, int] | None = None) -> list[StepLoad]:
    """The executor's KIP-435 steps of ``moves`` as :class:`~.estimate.StepLoad` rows, in move order.

    :param first: the executor's first additions of the whole plan (``moves`` a piece of it)
    """
    # Steps are the executor's (execution builds on planning.plan; imported here, not at load).
    from kafka_reassign.execution.steps import plan_all_steps
    from kafka_reassign.planning.plan import PartitionMove

    state = planned_state(moves)
    wanted = [PartitionMove(m.topic, m.partition, m.target, m.log_dirs) for m in moves]
    return step_loads(plan_all_steps(wanted, state, first), state)


def plan_loads(moves: Sequence[PlannedMove], split: int | None = None) -> list[StepLoad]:
    """:func:`move_loads` of a plan, made in two processes when it is big (same rows, same order).

    A partition's steps depend on that partition alone, except which replica a move gaining
    several brings in first: the executor chooses that across all such moves, so it is chosen
    once here and each half of the plan makes its steps with it.

    :param split: processes to use (default: two on a machine with two cores, for plans of
        :data:`~.forked.SPLIT_FROM` moves or more)
    """
    from kafka_reassign.execution.steps import first_additions

    split = split if split is not None else processes_for(len(moves))
    if split < 2:
        return move_loads(moves)
    first = first_additions(((m.topic, m.partition), m.current, m.target, int(m.size_bytes)) for m in moves)
    # The child also pickles its rows for the pipe (about a quarter of making them), the parent
    # only reads them back: the parent takes 6/11 of the moves so that both end together.
    half = len(moves) * 6 // 11
    made = fork_map(lambda k: move_loads(moves[half:] if k else moves[:half], first), 2)
    return made[0] + made[1]


def estimate_plan(moves: Sequence[PlannedMove], rate: float | None, log_dir_rate: float | None = None,
                  network: Mapping[int, float] | None = None,
                  source_free: bool = True) -> tuple[Estimate, list[StallPoint]]:
    """:func:`~.estimate.estimate_run` for a plan the planner holds (the executor's KIP-435 steps, made once).

    :param moves: the plan's partition moves with their sizes and produce rates
    :param rate: the replication throttle the run will use (None: unthrottled)
    :param log_dir_rate: the KIP-113 throttle (None: ``rate``)
    :param network: broker -> network bytes/s where the snapshot says
    :param source_free: False: no source-free bound (``source_free_seconds`` None)
    :returns: (the estimate, where the moves that never finish run out of quota)
    """
    limits = Limits(rate=rate, log_dir_rate=log_dir_rate, network=dict(network or {}))
    # Steps, loads and stall points are made once: estimate_run's figures on the same loads.
    loads = plan_loads(moves)
    stalls = stall_points(loads, limits, quota_load(loads, per_step=True), stalling_only=True)
    remote = sum(int(m.remote_bytes) for m in latest_moves(moves).values())
    return estimate_loads([loads], None, limits, True, True, stalls, source_free, remote)[0], stalls
