"""Leader-aware sourcing: copy each moving partition from its least busy in-sync replica.

A new replica fetches from the partition's leader, so the leaders at prepare time send every
copy. When one broker leads many moving partitions (a broker being decommissioned, a hot
broker relieved), its outbound throttle sets the pace while the other in-sync replicas of
those partitions send nothing. Neither Kafka's tool nor Cruise Control changes that.

With ``leader_sourcing`` on, each partition's copies get a *source*: the in-sync replica of its
current list that keeps the busiest sender's bytes lowest. Every leader starts as its
partitions' source, and partitions move to another in-sync replica only along paths that lower
the busiest sender (so no leadership moves for nothing). Where the source is not the leader, a *lead step* goes before the
partition's first copy: an AlterPartitionReassignments to the same replicas with the source
first (Kafka completes it at once: nothing is added), then a preferred leader election. Its
last step puts the plan's order back and the executor elects the plan's preferred leader,
as it does for every partition whose leader changed.

Never on a partition under min ISR or with an offline replica: a leader election there risks
the availability the move must protect. Lead steps count against ``max_leader_movements``.
The fixed-leader bound is then no longer the floor: :func:`kafka_reassign.planning.bounds.source_free_bound`
is the one to compare with.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from kafka_reassign.cluster.state import ClusterState, TopicPartition
from kafka_reassign.execution.steps import StepMove


def choose_sources(steps: Sequence[StepMove], state: ClusterState) -> dict[TopicPartition, int]:
    """Partition -> the in-sync replica that should send its copies (only where it is not the leader).

    Starts from every leader sending its own partitions, then moves partitions off the busiest
    sender along chains of in-sync replicas (an augmenting path, as in a flow) while that lowers
    the busiest sender's bytes. Not only down to the busiest receiver's bytes: a sender exactly
    as busy as a receiver must never idle, which a schedule of whole moves rarely manages.
    """
    copies: dict[TopicPartition, int] = {}
    first: dict[TopicPartition, StepMove] = {}
    for s in steps:
        if s.adding:
            copies[s.key] = copies.get(s.key, 0) + s.bytes_to_copy
            first.setdefault(s.key, s)
    sender: dict[TopicPartition, int] = {}
    candidates: dict[TopicPartition, tuple[int, ...]] = {}
    for key in copies:
        p = state.partition(*key)
        if p is None:
            continue
        sender[key] = p.leader
        ok = p.leader in first[key].current and not p.offline and len(p.isr) >= state.min_isr(key[0])
        candidates[key] = tuple(b for b in first[key].current if b in p.isr) if ok else (p.leader,)
    _balance_senders(sender, candidates, copies)
    return {k: b for k, b in sender.items() if b != state.partition(*k).leader}  # type: ignore[union-attr]


def _balance_senders(sender: dict[TopicPartition, int], candidates: Mapping[TopicPartition, tuple[int, ...]],
                     size: Mapping[TopicPartition, int]) -> None:
    """Lower the busiest sender's bytes by augmenting paths until no path helps (in place)."""
    load: dict[int, int] = {}
    by_broker: dict[int, set[TopicPartition]] = {}
    for k, b in sender.items():
        load[b] = load.get(b, 0) + size[k]
        by_broker.setdefault(b, set()).add(k)
    for _ in range(4 * len(sender) + 1):
        top = max(load, key=lambda b: (load[b], b), default=None)
        if top is None:
            return
        path = _augmenting_path(top, load[top], load, by_broker, candidates, size)
        if not path:
            return
        for key, dst in path:
            src = sender[key]
            load[src] -= size[key]
            load[dst] = load.get(dst, 0) + size[key]
            by_broker[src].discard(key)
            by_broker.setdefault(dst, set()).add(key)
            sender[key] = dst


def _augmenting_path(top: int, ceiling: int, load: Mapping[int, int], by_broker: Mapping[int, set[TopicPartition]],
                     candidates: Mapping[TopicPartition, tuple[int, ...]], size: Mapping[TopicPartition, int]
                     ) -> list[tuple[TopicPartition, int]]:
    """Moves (partition, new sender) from ``top`` to a broker that ends below ``ceiling`` (BFS), or []."""
    came: dict[int, tuple[int, TopicPartition] | None] = {top: None}
    queue = [top]
    for b in queue:
        for key in sorted(by_broker.get(b, ()), key=lambda k: (-size[k], k)):
            for c in candidates[key]:
                if c in came:
                    continue
                came[c] = (b, key)
                if load.get(c, 0) + size[key] < ceiling:
                    path = []
                    at = c
                    while came[at] is not None:
                        prev, k = came[at]  # type: ignore[misc]
                        path.append((k, at))
                        at = prev
                    return path[::-1]
                queue.append(c)
    return []


def with_lead_steps(steps: Sequence[StepMove], sources: Mapping[TopicPartition, int]) -> list[StepMove]:
    """``steps`` with a lead step before the first copy of each partition in ``sources``.

    The lead step reorders the current replicas, the source first; the partition's steps that
    follow start from that order (the same replicas) and are renumbered.
    """
    by_key: dict[TopicPartition, list[StepMove]] = {}
    for s in steps:
        by_key.setdefault(s.key, []).append(s)
    out: list[StepMove] = []
    for key, chain in by_key.items():
        src = sources.get(key)
        at = next((i for i, s in enumerate(chain) if s.adding), None)
        if src is None or at is None or src not in chain[at].current or chain[at].current[0] == src:
            out.extend(chain)
            continue
        cur = chain[at].current
        ordered = (src, *(b for b in cur if b != src))
        lead = replace(chain[at], target=ordered, log_dirs=None, size_bytes=chain[at].size_bytes)
        new = [*chain[:at], lead, replace(chain[at], current=ordered), *chain[at + 1:]]
        out.extend(replace(s, step_index=i, step_count=len(new)) for i, s in enumerate(new))
    return out
