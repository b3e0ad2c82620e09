"""KIP-435 incremental steps.

A partition move ``[1,2,3] -> [4,5,6]`` submitted as one reassignment makes three new
followers fetch at once and keeps the old ones until all three caught up. KIP-435 instead
moves incrementally: bring the new preferred leader in first, then add one replica, let it
catch up, drop one old replica, and repeat. Each step is one AlterPartitionReassignments
call; Kafka only removes the leaving replica after the arriving one is in sync, so a step
from S to S' keeps every replica of S in the ISR until S' is complete.

Safety invariant (tested): every intermediate replica list has at least
``min(min_isr, len(target))`` replicas, so the in-sync count never drops below
min.insync.replicas because of us. When the current list is *smaller* than min ISR
(a replication-factor increase from 1), the first step adds as many replicas as needed at
once, which is the one exception KIP-435 makes to "one at a time".

The executor (:mod:`kafka_reassign.execution.executor`) runs these steps in a sliding window: a
partition's next step becomes eligible once its previous step completed (a step's
``current`` is the previous step's ``target``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Mapping, Sequence

from kafka_reassign.planning.plan import ANY_LOG_DIR, PartitionMove
from kafka_reassign.cluster.state import ClusterState, InFlight, PartitionInfo, TopicPartition


def plan_steps(current: Sequence[int], target: Sequence[int], min_isr: int,
               offline: Iterable[int] = (), add_first: int | None = None) -> list[list[int]]:
    """Intermediate replica lists from ``current`` to ``target`` (last one == target).

    :param current: current replicas (preferred leader first)
    :param target: final replicas
    :param min_isr: the topic's min.insync.replicas
    :param offline: replicas on dead brokers; dropped first since they are not in sync anyway
    :param add_first: the new replica to bring in first (default the new preferred leader); the
        others follow in target order, cyclically. The executor spreads first additions over
        the receiving brokers so that every one of them copies from the start of a run.
    :returns: [] when already at target; otherwise the successive replica lists
    """
    current, target = list(current), list(target)
    if current == target:
        return []
    if set(current) == set(target):
        # Same brokers, new order: one step that only changes the preferred leader.
        return [target]
    offline_set = set(offline)
    adds = [b for b in target if b not in current]          # target order: preferred leader first
    if add_first in adds:
        at = adds.index(add_first)
        adds = adds[at:] + adds[:at]
    drops = [b for b in current if b not in target]
    if len(adds) == 1 and len(drops) == 1:  # one broker swapped (most moves): the loop makes one step
        return [target]
    # Drop dead replicas first, then followers from the back, the current leader (first) last:
    # leadership moves once, to the new preferred leader, not to an arbitrary follower.
    if len(drops) > 1:
        drops.sort(key=lambda b: (b not in offline_set, -current.index(b)))
    floor = min(max(1, min_isr), len(target))                 # never fewer in the list than this
    steps: list[list[int]] = []
    members = list(current)
    while adds or drops:
        added: list[int] = []
        if adds:
            added.append(adds.pop(0))
        # KIP-435's exception: below min ISR, add enough at once so producers can continue.
        while adds and len(members) + len(added) < floor:
            added.append(adds.pop(0))
        size_after_add = len(members) + len(added)
        dropped: list[int] = []
        # Drop one leaving replica unless that would take the list below the floor.
        if drops and size_after_add - 1 >= floor:
            dropped.append(drops.pop(0))
        if not added and not dropped:  # cannot happen with a valid target; guard anyway
            break
        members = [b for b in members if b not in dropped] + added
        steps.append(_order(members, target, current))
    if not steps or steps[-1] != target:
        if steps and set(steps[-1]) == set(target):
            steps[-1] = target
        else:
            steps.append(target)
    return steps


def _order(members: list[int], target: list[int], current: list[int]) -> list[int]:
    """Order an intermediate list: target members in target order first, then leaving ones.

    Putting the new preferred leader first means a preferred-leader election (or Kafka's
    auto leader rebalance) moves leadership to it as soon as it is in sync.
    """
    in_target = [b for b in target if b in members]
    leaving = [b for b in current if b in members and b not in target]
    return in_target + leaving


@dataclass(frozen=True)
class StepMove:
    """One step of one partition: an AlterPartitionReassignments (or AlterReplicaLogDirs) call.

    :param current: replicas before the step
    :param target: replicas after the step
    :param log_dirs: per target replica a log dir or "any" (only on the final step)
    :param size_bytes: partition size used to estimate the step's duration
    :param step_index: 0-based index of this step among the partition's steps
    :param step_count: number of steps of this partition

    What the executor asks of a step at every refill and wake (its key, the replicas it adds)
    is computed once (``cached_property``: the instance is frozen, its fields never change).
    """

    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None
    size_bytes: int = 0
    step_index: int = 0
    step_count: int = 1

    @cached_property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @cached_property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.target if b not in self.current)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.current if b not in self.target)

    @cached_property
    def is_log_dir_only(self) -> bool:
        """Same brokers, only log dirs change (KIP-113, AlterReplicaLogDirs)."""
        return self.current == self.target and self.log_dirs is not None

    @cached_property
    def is_leader_only(self) -> bool:
        """Same replicas in another order: only the preferred leader changes, nothing is copied."""
        return self.current != self.target and set(self.current) == set(self.target)

    @cached_property
    def moves_leader(self) -> bool:
        """Whether the preferred leader changes (a leader movement for the per-batch cap)."""
        return bool(self.current and self.target) and self.current[0] != self.target[0]

    @property
    def brokers_touched(self) -> set[int]:
        """Brokers that gain or lose a replica (or move it between dirs) in this step."""
        if self.is_log_dir_only:
            return set(self.wanted_dirs())
        return set(self.adding) | set(self.removing)

    def wanted_dirs(self) -> dict[int, str]:
        if not self.log_dirs:
            return {}
        return {b: d for b, d in zip(self.target, self.log_dirs) if d != ANY_LOG_DIR}

    @property
    def bytes_to_copy(self) -> int:
        """Bytes this step copies: one partition copy per added (or dir-moved) replica."""
        if self.is_log_dir_only:
            return self.size_bytes * max(1, len(self.wanted_dirs()))
        return self.size_bytes * len(self.adding)

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "current": list(self.current),
                "target": list(self.target),
                "log_dirs": list(self.log_dirs) if self.log_dirs is not None else None,
                "size_bytes": self.size_bytes, "step_index": self.step_index,
                "step_count": self.step_count}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StepMove":
        return cls(topic=d["topic"], partition=int(d["partition"]),
                   current=tuple(int(b) for b in d["current"]),
                   target=tuple(int(b) for b in d["target"]),
                   log_dirs=tuple(d["log_dirs"]) if d.get("log_dirs") is not None else None,
                   size_bytes=int(d.get("size_bytes", 0)), step_index=int(d.get("step_index", 0)),
                   step_count=int(d.get("step_count", 1)))


def steps_for_move(move: PartitionMove, state: ClusterState, add_first: int | None = None) -> list[StepMove]:
    """All steps of one partition move, including a final log-dir step when needed.

    :param move: the target placement
    :param state: the cluster now (current replicas, min ISR, sizes, replica dirs)
    :param add_first: the new replica to add first (see :func:`plan_steps`)
    """
    p = state.partition(move.topic, move.partition)
    if p is None:
        raise ValueError(f"{move.name}: unknown partition")
    return _move_steps(move, p, state.min_isr(move.topic), state.in_flight.get(move.key), add_first)


def _move_steps(move: PartitionMove, p: PartitionInfo, min_isr: int, inflight: InFlight | None,
                add_first: int | None) -> list[StepMove]:
    """:func:`steps_for_move` once the partition, its topic's min ISR and its move in flight are known."""
    current = list(p.replicas)
    if inflight is not None:
        # Resume: plan from where the partition was before the interrupted step, so that the
        # first step we compute is exactly the one already in flight (and gets adopted).
        current = list(inflight.original)
    if inflight is not None and tuple(inflight.target) == tuple(move.replicas):
        # Already moving straight to the final target (e.g. started by a previous tool run):
        # adopt that move as one step rather than fighting it.
        lists = [list(move.replicas)]
    else:
        lists = plan_steps(current, move.replicas, min_isr, offline=p.offline,
                           add_first=add_first)
        if inflight is not None:
            # Resume: the interrupted run may have brought another new replica in first.
            for first in (b for b in move.replicas if b not in current):
                alt = plan_steps(current, move.replicas, min_isr, offline=p.offline,
                                 add_first=first)
                if alt and tuple(alt[0]) == tuple(inflight.target):
                    lists = alt
                    break
    wanted = move.wanted_dirs()
    need_dir_step = any(p.replica_dirs.get(b) != d for b, d in wanted.items())
    n = len(lists) + int(need_dir_step)
    topic, part, size = move.topic, move.partition, p.size_bytes
    out: list[StepMove] = []
    prev = tuple(current)
    for i, lst in enumerate(lists):
        # Every step that adds a replica with a wanted dir carries the dirs of its target, so
        # execution tells the broker where to create it: a replica added by an early step of a
        # multi-step move would otherwise land in any dir and be copied a second time between dirs.
        step = tuple(lst)
        adds_wanted = bool(wanted) and any(b in wanted and b not in prev for b in lst)
        dirs = tuple(wanted.get(b, ANY_LOG_DIR) for b in lst) if adds_wanted else None
        # positional (topic, partition, current, target, log_dirs, size_bytes, step_index, step_count):
        # a million steps at 3M replicas
        out.append(StepMove(topic, part, prev, step, dirs, size, i, n))
        prev = step
    if need_dir_step:
        final = tuple(move.replicas)
        out.append(StepMove(topic, part, final, final, tuple(move.log_dirs or ()), size, n - 1, n))
    return out


def first_additions(moves: Iterable[tuple[TopicPartition, Sequence[int], Sequence[int], int]]) -> dict[TopicPartition, int]:
    """For each move gaining several replicas: the one to bring in first.

    Chosen so that first (then second...) additions spread their bytes evenly over the
    receiving brokers. With every chain starting on the same broker (a 1,2,3 -> 4,5,6 move adds
    4 first everywhere), broker 6 would idle until the first partitions reached their last step.

    :param moves: (partition, current replicas, target replicas, size in bytes), in plan order
    """
    load: dict[tuple[int, int], float] = {}   # (position in chain, broker) -> bytes
    first: dict[TopicPartition, int] = {}
    several = [(key, adds, size) for key, current, target, size in moves
               if len(adds := [b for b in target if b not in current]) >= 2]
    for key, adds, size in sorted(several, key=lambda m: -m[2]):  # largest first (stable)
        weight = float(max(1, size))

        def cost(at: int) -> tuple[float, ...]:
            order = adds[at:] + adds[:at]
            return tuple(sorted((load.get((i, b), 0.0) + weight for i, b in enumerate(order)), reverse=True))

        best = min(range(len(adds)), key=cost)
        for i, b in enumerate(adds[best:] + adds[:best]):
            load[(i, b)] = load.get((i, b), 0.0) + weight
        first[key] = adds[best]
    return first


def plan_all_steps(moves: Iterable[PartitionMove], state: ClusterState,
                   first: Mapping[TopicPartition, int] | None = None) -> list[StepMove]:
    """Every step of every move, partitions in input order, each partition's steps in order.

    Partitions gaining several replicas bring them in one at a time, the first as
    :func:`first_additions` chooses over all of them (resumed moves keep the deterministic
    order, so the step in flight matches).

    :param first: those first additions when the caller made them (a plan's steps made in pieces)
    """
    moves = list(moves)
    # each partition looked up once (a million moves at 3M replicas)
    found = [(m, state.partition(m.topic, m.partition)) for m in moves]
    if first is None:
        first = first_additions(((m.topic, m.partition), p.replicas, m.replicas, p.size_bytes) for m, p in found
                                if p is not None and m.key not in state.in_flight)
    out: list[StepMove] = []
    min_isr: dict[str, int] = {}  # per topic, asked once
    for m, p in found:
        if p is None:
            raise ValueError(f"{m.name}: unknown partition")
        key = (m.topic, m.partition)
        isr = min_isr[m.topic] if m.topic in min_isr else min_isr.setdefault(m.topic, state.min_isr(m.topic))
        out.extend(_move_steps(m, p, isr, state.in_flight.get(key), first.get(key)))
    return out


def steps_to_rows(steps: Iterable[StepMove]) -> list[list[Any]]:
    """Steps as compact JSON rows (20k steps stay ~1 MB): topic, partition, current, target,
    log dirs, size, step index, step count."""
    return [[s.topic, s.partition, list(s.current), list(s.target),
             list(s.log_dirs) if s.log_dirs is not None else None, s.size_bytes, s.step_index, s.step_count]
            for s in steps]


def steps_from_rows(rows: Iterable[Sequence[Any]]) -> list[StepMove]:
    return [StepMove(topic=r[0], partition=int(r[1]), current=tuple(int(b) for b in r[2]),
                     target=tuple(int(b) for b in r[3]), log_dirs=tuple(r[4]) if r[4] is not None else None,
                     size_bytes=int(r[5]), step_index=int(r[6]), step_count=int(r[7])) for r in rows]
