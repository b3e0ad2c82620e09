"""Replica placement for new topics and partitions, the way Kafka's classic assignor does it.

Kafka (``AdminUtils.assignReplicasToBrokers``) spreads leaders round-robin from a random
start, shifts followers by a growing offset, and when every broker has a rack it first
interleaves the broker list by rack so consecutive replicas land on different racks.
"""
from __future__ import annotations

import random
from typing import Sequence


def rack_alternated(brokers: Sequence[tuple[int, str | None]]) -> list[int]:
    """Broker ids interleaved by rack: a1, b1, c1, a2, b2, ...

    :param brokers: (id, rack) pairs
    """
    by_rack: dict[str, list[int]] = {}
    for bid, rack in sorted(brokers):
        by_rack.setdefault(str(rack), []).append(bid)
    racks = sorted(by_rack)
    out: list[int] = []
    depth = max(len(v) for v in by_rack.values())
    for i in range(depth):
        for rack in racks:
            if i < len(by_rack[rack]):
                out.append(by_rack[rack][i])
    return out


def _shifted(first: int, shift: int, k: int, n: int) -> int:
    """Index of the k-th follower: a shift in [1, n-1] so it never hits the leader."""
    return (first + 1 + (shift + k) % (n - 1)) % n


def assign_replicas(brokers: Sequence[tuple[int, str | None]], num_partitions: int, replication_factor: int,
                    start_partition: int = 0, rng: random.Random | None = None) -> dict[int, list[int]]:
    """Place ``num_partitions`` partitions with ``replication_factor`` replicas each.

    :param brokers: live (id, rack) pairs to place on
    :param num_partitions: how many partitions to place
    :param replication_factor: replicas per partition, at most len(brokers)
    :param start_partition: index of the first partition (CreatePartitions adds after existing ones)
    :param rng: random source for the start index and shift (seed it for determinism)
    :returns: partition index -> replica list
    """
    rng = rng or random.Random()
    n = len(brokers)
    if replication_factor > n or n == 0:
        raise ValueError(f"replication factor {replication_factor} larger than {n} available brokers")
    racks = {bid: rack for bid, rack in brokers}
    rack_aware = all(r is not None for r in racks.values()) and len(set(racks.values())) > 1
    arranged = rack_alternated(brokers) if rack_aware else sorted(racks)
    num_racks = len(set(racks.values())) if rack_aware else 1
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, list[int]] = {}
    for i in range(num_partitions):
        p = start_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        if not rack_aware:
            for k in range(replication_factor - 1):
                replicas.append(arranged[_shifted(first, shift, k, n)])
        else:
            used_racks = {racks[leader]}
            used = {leader}
            k = 0
            while len(replicas) < replication_factor:
                candidate = arranged[_shifted(first, shift * num_racks, k, n)]
                k += 1
                # a new rack first; once every rack holds one, any broker not yet used
                if ((racks[candidate] not in used_racks or len(used_racks) == num_racks)
                        and (candidate not in used or len(used) == n)):
                    replicas.append(candidate)
                    used_racks.add(racks[candidate])
                    used.add(candidate)
                if k > 4 * n * n:  # cannot happen with rf <= n, but never loop forever
                    raise ValueError("no rack-aware placement found")
        out[p] = replicas
    return out
