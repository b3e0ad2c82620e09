"""Leader-aware sourcing: copy each moving partition from its least busy in-sync replica.

A new replica fetches from the partition's leader, so the leaders at prepare time send every
copy. When one broker leads many moving partitions (a broker being decommissioned, a hot
broker relieved), its outbound throttle sets the pace while the other in-sync replicas of
those partitions send nothing. Neither Kafka's tool nor Cruise Control changes that.

With ``leader_sourcing`` on, each partition's copies get a *source*: the in-sync replica of its
current list that keeps the busiest sender's bytes lowest (largest partitions first, each to the
candidate with the least outbound bytes so far; the leader keeps it on a tie, so no leadership
moves for nothing). Where the source is not the leader, a *lead step* goes before the
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

    Outbound bytes of partitions that cannot change leader count first, as fixed load.
    """
    copies: dict[TopicPartition, int] = {}
    first: dict[TopicPartition, StepMove] = {}
    for s in steps:
        if s.adding:
            copies[s.key] = copies.get(s.key, 0) + s.bytes_to_copy
            first.setdefault(s.key, s)
    load: dict[int, float] = {}
    movable: list[tuple[TopicPartition, int, int, tuple[int, ...]]] = []
    for key, n in copies.items():
        p = state.partition(*key)
        if p is None:
            continue
        candidates = tuple(b for b in first[key].current if b in p.isr)
        eligible = (p.leader in first[key].current and not p.offline
                    and len(p.isr) >= state.min_isr(key[0]) and len(candidates) > 1)
        if eligible:
            movable.append((key, n, p.leader, candidates))
        else:
            load[p.leader] = load.get(p.leader, 0.0) + n
    chosen: dict[TopicPartition, int] = {}
    for key, n, leader, candidates in sorted(movable, key=lambda m: (-m[1], m[0])):
        best = min(candidates, key=lambda b: (load.get(b, 0.0), b != leader, b))
        load[best] = load.get(best, 0.0) + n
        if best != leader:
            chosen[key] = best
    return chosen


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
