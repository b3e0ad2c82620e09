"""KIP-435 incremental steps and batches.

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

Batches: at most one step of a partition per batch and successive steps of a partition in
successive batches (a step's ``current`` is the previous step's ``target``). Limits per
batch: ``max_partition_movements`` steps, ``max_movements_per_broker`` replica additions or
removals touching any broker, ``max_leader_movements`` preferred-leader changes.
"""
from __future__ import annotations

import json
from bisect import bisect_left, bisect_right, insort
from heapq import heapify, heappop, heapreplace
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from kafka_reassign.plan import ANY_LOG_DIR, PartitionMove
from kafka_reassign.state import ClusterState

INT_MAX = 2**31 - 1


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
    # Drop dead replicas first, then followers from the back, the current leader (first) last:
    # leadership moves once, to the new preferred leader, not to an arbitrary follower.
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
    """

    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None
    size_bytes: int = 0
    step_index: int = 0
    step_count: int = 1

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.target if b not in self.current)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.current if b not in self.target)

    @property
    def is_log_dir_only(self) -> bool:
        """Same brokers, only log dirs change (KIP-113, AlterReplicaLogDirs)."""
        return self.current == self.target and self.log_dirs is not None

    @property
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


@dataclass
class Batch:
    """Steps executed together; the next batch starts only when this one is finished."""

    index: int
    steps: list[StepMove] = field(default_factory=list)

    @property
    def bytes_to_copy(self) -> int:
        return sum(s.bytes_to_copy for s in self.steps)

    @property
    def leader_movements(self) -> int:
        return sum(1 for s in self.steps if s.moves_leader)

    def broker_movements(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for s in self.steps:
            for b in s.brokers_touched:
                out[b] = out.get(b, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "steps": [s.to_json() for s in self.steps]}

    @classmethod
    def from_json(cls, d: dict[str, Any] | str) -> "Batch":
        if isinstance(d, str):
            d = json.loads(d)
        return cls(index=int(d["index"]), steps=[StepMove.from_json(s) for s in d["steps"]])


def steps_for_move(move: PartitionMove, state: ClusterState, add_first: int | None = None) -> list[StepMove]:
    """All steps of one partition move, including a final log-dir step when needed.

    :param move: the target placement
    :param state: the cluster now (current replicas, min ISR, sizes, replica dirs)
    :param add_first: the new replica to add first (see :func:`plan_steps`)
    """
    p = state.partition(move.topic, move.partition)
    if p is None:
        raise ValueError(f"{move.name}: unknown partition")
    current = list(p.replicas)
    inflight = state.in_flight.get(move.key)
    if inflight is not None:
        # Resume: plan from where the partition was before the interrupted step, so that the
        # first step we compute is exactly the one already in flight (and gets adopted).
        current = list(inflight.original)
    if inflight is not None and tuple(inflight.target) == tuple(move.replicas):
        # Already moving straight to the final target (e.g. started by a previous tool run):
        # adopt that move as one step rather than fighting it.
        lists = [list(move.replicas)]
    else:
        lists = plan_steps(current, move.replicas, state.min_isr(move.topic), offline=p.offline,
                           add_first=add_first)
        if inflight is not None:
            # Resume: the interrupted run may have brought another new replica in first.
            for first in (b for b in move.replicas if b not in current):
                alt = plan_steps(current, move.replicas, state.min_isr(move.topic), offline=p.offline,
                                 add_first=first)
                if alt and tuple(alt[0]) == tuple(inflight.target):
                    lists = alt
                    break
    wanted = move.wanted_dirs()
    need_dir_step = any(p.replica_dirs.get(b) != d for b, d in wanted.items())
    chain: list[tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...] | None]] = []
    prev = tuple(current)
    for lst in lists:
        # The step reaching the final target carries the wanted dirs, so execution can tell
        # the brokers where to create the new replicas (no second copy between dirs).
        final = tuple(lst) == tuple(move.replicas) and bool(wanted)
        chain.append((prev, tuple(lst), tuple(move.log_dirs) if final and move.log_dirs else None))
        prev = tuple(lst)
    if need_dir_step:
        chain.append((tuple(move.replicas), tuple(move.replicas), tuple(move.log_dirs or ())))
    n = len(chain)
    return [StepMove(topic=move.topic, partition=move.partition, current=c, target=t, log_dirs=ld,
                     size_bytes=p.size_bytes, step_index=i, step_count=n)
            for i, (c, t, ld) in enumerate(chain)]


def plan_all_steps(moves: Iterable[PartitionMove], state: ClusterState) -> list[StepMove]:
    """Every step of every move, partitions in input order, each partition's steps in order.

    Partitions gaining several replicas bring them in one at a time; which one comes first is
    chosen here so that first (then second...) additions spread their bytes evenly over the
    receiving brokers. With every chain starting on the same broker (a 1,2,3 -> 4,5,6 move adds
    4 first everywhere), broker 6 would idle until the first partitions reached their last step.
    """
    moves = list(moves)
    load: dict[tuple[int, int], float] = {}   # (position in chain, broker) -> bytes
    first: dict[tuple[str, int], int | None] = {}
    for m in sorted(moves, key=lambda m: -state.size_of(m.topic, m.partition)):
        p = state.partition(m.topic, m.partition)
        adds = [b for b in m.replicas if p is not None and b not in p.replicas]
        if len(adds) < 2 or p is None or m.key in state.in_flight:
            continue  # resumed moves keep the deterministic order, so the step in flight matches
        size = float(max(1, p.size_bytes))

        def cost(at: int) -> tuple[float, ...]:
            order = adds[at:] + adds[:at]
            return tuple(sorted((load.get((i, b), 0.0) + size for i, b in enumerate(order)), reverse=True))

        best = min(range(len(adds)), key=cost)
        for i, b in enumerate(adds[best:] + adds[:best]):
            load[(i, b)] = load.get((i, b), 0.0) + size
        first[m.key] = adds[best]
    out: list[StepMove] = []
    for m in moves:
        out.extend(steps_for_move(m, state, add_first=first.get(m.key)))
    return out


def build_batches(moves: Iterable[PartitionMove], state: ClusterState,
                  max_partition_movements: int = INT_MAX, max_movements_per_broker: int = INT_MAX,
                  max_leader_movements: int = INT_MAX) -> list[Batch]:
    """Turn moves into sequential batches of steps within the concurrency limits.

    Packing: a batch lasts as long as its slowest step, so each batch is filled from the
    candidates in decreasing order of (steps still to go, bytes): partitions with long chains
    start early, and the biggest moves travel together instead of one big move holding up
    a batch of small ones. The per-broker cap spreads each batch's copy traffic over brokers
    (a candidate whose brokers are full is left for the next batch).

    Each batch is the greedy pass over the pending steps in that order, taking every step
    that still fits. Done naively that is a sort and a scan of every pending step per batch
    (minutes at 100k+ partitions); instead every step gets its rank in that order once, the
    pending steps are kept sorted by rank and bucketed by the brokers they touch, and once
    few brokers still have room the pass only visits the buckets of those brokers (merged
    by rank in a heap). The batches are the same as the naive pass's.

    :param moves: partition moves (already validated)
    :param state: cluster state for current replicas, min ISR and sizes
    :param max_partition_movements: steps per batch (>= 1)
    :param max_movements_per_broker: replica additions/removals per broker per batch (>= 1)
    :param max_leader_movements: preferred-leader changes per batch (>= 1)
    """
    for name, v in (("max_partition_movements", max_partition_movements),
                    ("max_movements_per_broker", max_movements_per_broker),
                    ("max_leader_movements", max_leader_movements)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    chains = [c for c in (steps_for_move(m, state) for m in moves) if c]

    # Rank every step of every chain once, in the order a batch is filled: more steps still
    # to go first, then more bytes, then input order. At most one step of a chain is pending
    # at a time, so comparing ranks is comparing those keys.
    flat: list[tuple[int, int, int, int]] = []
    for i, chain in enumerate(chains):
        n = len(chain)
        for j, s in enumerate(chain):
            flat.append((j - n, -s.bytes_to_copy, i, j))
    flat.sort()
    total = len(flat)
    step_at: list[StepMove] = [chains[i][j] for _, _, i, j in flat]
    rank_of = [[0] * len(c) for c in chains]
    for r, (_, _, i, j) in enumerate(flat):
        rank_of[i][j] = r
    next_rank = [-1] * total
    for r, (_, _, i, j) in enumerate(flat):
        if j + 1 < len(chains[i]):
            next_rank[r] = rank_of[i][j + 1]
    del flat, rank_of

    # Brokers as dense indices; per step the brokers it touches and whether it moves a leader.
    dense: dict[int, int] = {}
    touched: list[tuple[int, ...]] = []
    for s in step_at:
        touched.append(tuple(sorted(dense.setdefault(b, len(dense)) for b in s.brokers_touched)))
    leader = [s.moves_leader for s in step_at]
    n_brokers = len(dense)

    # Pending steps bucketed by the brokers they touch (ranks sorted in each bucket), so that
    # the steps that can still fit once few brokers have room are found without a full scan.
    buckets: dict[tuple[int, ...], list[int]] = {}
    order = _first_ranks(next_rank, total)
    for r in order:
        buckets.setdefault(touched[r], []).append(r)
    wide = {k for k in buckets if len(k) > 2}  # rare (replication-factor increases): scanned

    cap_b, cap_l, cap_p = max_movements_per_broker, max_leader_movements, max_partition_movements

    batches: list[Batch] = []
    while order:
        load = [0] * n_brokers
        room = n_brokers          # brokers below the cap
        leaders = 0
        chosen: list[int] = []

        def take(r: int) -> bool:
            """Add step ``r`` to the batch when it fits; True when it did."""
            nonlocal room, leaders
            t = touched[r]
            for b in t:
                if load[b] >= cap_b:
                    return False
            if leader[r]:
                if leaders >= cap_l:
                    return False
                leaders += 1
            for b in t:
                load[b] += 1
                if load[b] == cap_b:
                    room -= 1
            chosen.append(r)
            return True

        # The greedy pass in rank order. It scans ``order`` while many brokers have room;
        # once the brokers with room are few compared with what is left to scan, only steps
        # touching nothing but those brokers can still fit, so the pass goes on over their
        # buckets instead: a heap of bucket heads (ranks after the last one scanned) yields
        # the steps in rank order, and a bucket is dropped as soon as one of its brokers is
        # full. Setting up the heap costs ~room^2/2 bucket look-ups (each ~10-20 times the
        # scan of one step), hence the threshold.
        pos, n_order, switch = 0, len(order), False
        while pos < n_order:
            r = order[pos]
            pos += 1
            t = touched[r]
            if len(t) == 2:   # the common case (one replica in, one out), inlined
                a, b = t
                if load[a] >= cap_b or load[b] >= cap_b:
                    continue
                if leader[r]:
                    if leaders >= cap_l:
                        continue
                    leaders += 1
                load[a] += 1
                load[b] += 1
                chosen.append(r)
                if len(chosen) >= cap_p:
                    break
                if load[a] == cap_b or load[b] == cap_b:
                    room -= (load[a] == cap_b) + (load[b] == cap_b)
                    if 8 * room * room <= n_order - pos:
                        switch = True
                        break
            elif take(r):
                if len(chosen) >= cap_p:
                    break
                if 8 * room * room <= n_order - pos:
                    switch = True
                    break
        if switch:
            last = order[pos - 1]
            free = [b for b in range(n_brokers) if load[b] < cap_b]
            free_set = set(free)
            keys: list[tuple[int, ...]] = [()]
            keys += [(a,) for a in free]
            keys += [(a, b) for x, a in enumerate(free) for b in free[x + 1:]]
            keys += [k for k in wide if free_set.issuperset(k)]
            heap: list[tuple[int, int, tuple[int, ...]]] = []
            for k in keys:
                lst = buckets.get(k)
                if lst and lst[-1] > last:
                    at = 0 if lst[0] > last else bisect_right(lst, last)
                    heap.append((lst[at], at, k))
            heapify(heap)
            while heap:
                r, at, k = heap[0]
                if len(k) == 2:
                    dead = load[k[0]] >= cap_b or load[k[1]] >= cap_b
                else:
                    dead = any(load[b] >= cap_b for b in k)
                if dead:
                    heappop(heap)            # a broker of this bucket is full: all of it waits
                    continue
                take(r)                      # fits unless it moves a leader past the cap
                if len(chosen) >= cap_p:
                    break
                lst = buckets[k]
                if at + 1 < len(lst):
                    heapreplace(heap, (lst[at + 1], at + 1, k))
                else:
                    heappop(heap)
        if not chosen:  # impossible with limits >= 1 (a step touches a broker at most once)
            raise RuntimeError("batch building made no progress")
        batches.append(Batch(index=len(batches), steps=[step_at[r] for r in chosen]))

        # Next pending set: drop the chosen steps, add their successors (order stays sorted).
        chosen.sort()
        kept: list[int] = []
        successors: list[int] = []
        start = 0
        for r in chosen:
            at = bisect_left(order, r, start)
            kept += order[start:at]
            start = at + 1
            lst = buckets[touched[r]]
            del lst[bisect_left(lst, r)]
            nr = next_rank[r]
            if nr >= 0:
                successors.append(nr)
                k = touched[nr]
                lst = buckets.get(k)
                if lst is None:
                    buckets[k] = [nr]
                    if len(k) > 2:
                        wide.add(k)
                else:
                    insort(lst, nr)
        kept += order[start:]
        successors.sort()
        kept += successors
        kept.sort()  # two sorted runs: a linear merge
        order = kept
    return batches


def _first_ranks(next_rank: list[int], total: int) -> list[int]:
    """Ranks of the first step of every chain (the steps no other step leads to)."""
    is_next = bytearray(total)
    for nr in next_rank:
        if nr >= 0:
            is_next[nr] = 1
    return [r for r in range(total) if not is_next[r]]


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


def batches_to_json(batches: list[Batch]) -> list[dict[str, Any]]:
    return [b.to_json() for b in batches]


def batches_from_json(data: list[dict[str, Any]] | str) -> list[Batch]:
    if isinstance(data, str):
        data = json.loads(data)
    return [Batch.from_json(d) for d in data]
