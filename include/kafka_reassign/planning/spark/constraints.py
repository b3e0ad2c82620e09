"""Hard constraints every plan must satisfy, checked on the final assignment.

The goals are built to respect these rules move by move; this module checks the result once
more, independently, so that a bug in a goal or a user's assignor can never produce a plan that
puts two replicas in one rack when racks allow otherwise, fills a disk past the ceiling, or
touches an excluded topic or broker. Tests use the same checks.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.planning.spark.cluster import Cluster
from kafka_reassign.errors import Problem

Placement = Sequence[tuple[Sequence[int], Sequence[str]]]
EPS = 1.0  # bytes; loads are sums of floats


def check_constraints(cluster: Cluster, final: Placement, options: PlanOptions,
                      allow_rf_change: bool = False) -> list[Problem]:
    """Every rule broken by ``final`` (one problem per partition / broker / log dir).

    :param final: (replicas, log dirs) per partition index
    :param allow_rf_change: whether a partition may change its number of replicas
    """
    problems: list[Problem] = []
    excluded_topics = set(options.exclude_topics)
    excluded_brokers = set(options.exclude_brokers)
    racks_all = {cluster.rack_of(b) for b in cluster.brokers if b not in excluded_brokers}
    drained = set(options.brokers) if options.goal == "remove-brokers" else set()
    n_racks = len({cluster.rack_of(b) for b in cluster.brokers
                   if b not in excluded_brokers and b not in drained}) or len(racks_all) or 1
    before_bytes: dict[int, float] = defaultdict(float)
    after_bytes: dict[int, float] = defaultdict(float)
    before_dir: dict[tuple[int, str], float] = defaultdict(float)
    after_dir: dict[tuple[int, str], float] = defaultdict(float)
    for p, (reps, dirs) in zip(cluster.partitions, final):
        for r, d in zip(p.replicas, p.log_dirs):
            before_bytes[r] += p.size_bytes
            before_dir[(r, d)] += p.size_bytes
        for r, d in zip(reps, dirs):
            after_bytes[r] += p.size_bytes
            after_dir[(r, d)] += p.size_bytes
        if tuple(reps) == p.replicas and tuple(dirs) == p.log_dirs:
            continue
        name = p.name
        if p.topic in excluded_topics:
            problems.append(Problem(name, f"topic {p.topic} is excluded but the plan changes it",
                                    "excluded_topic"))
        if len(set(reps)) != len(reps):
            problems.append(Problem(name, f"replicas {list(reps)} name a broker twice", "duplicate_broker"))
        unknown = [r for r in reps if r not in cluster.brokers]
        if unknown:
            problems.append(Problem(name, f"unknown brokers {unknown}", "unknown_broker"))
            continue
        if not allow_rf_change and len(reps) != len(p.replicas):
            problems.append(Problem(name, f"replication factor changes from {len(p.replicas)} to "
                                          f"{len(reps)}", "rf_change"))
        old_set, new_set = set(p.replicas), set(reps)
        touched_excluded = (old_set ^ new_set) & excluded_brokers
        if touched_excluded:
            problems.append(Problem(name, f"excluded brokers {sorted(touched_excluded)} gain or lose "
                                          "a replica", "excluded_broker"))
        before_racks = len({cluster.rack_of(r) for r in p.replicas})
        after_racks = len({cluster.rack_of(r) for r in reps})
        want = min(before_racks + max(0, len(reps) - len(p.replicas)), len(reps), n_racks)
        if after_racks < want:
            problems.append(Problem(name, f"replicas {list(reps)} span {after_racks} racks where "
                                          f"{want} are possible", "rack"))
    ceiling = options.capacity_ceiling
    for b, after in after_bytes.items():
        cap = cluster.brokers[b].capacity_bytes if b in cluster.brokers else None
        if cap and after > before_bytes.get(b, 0.0) + EPS and after > cap * ceiling + EPS:
            problems.append(Problem(f"broker {b}", f"would hold {after / cap:.1%} of its capacity, above "
                                                   f"the ceiling {ceiling:.0%}", "capacity"))
    for (b, d), after in after_dir.items():
        if b not in cluster.brokers:
            continue
        caps = {x.path: x.capacity_bytes for x in cluster.brokers[b].log_dirs}
        cap = caps.get(d)
        if cap is None:
            problems.append(Problem(f"broker {b}", f"log dir {d} does not exist", "unknown_log_dir"))
        elif after > before_dir.get((b, d), 0.0) + EPS and after > cap * ceiling + EPS:
            problems.append(Problem(f"broker {b} log dir {d}", f"would hold {after / cap:.1%} of its "
                                    f"capacity, above the ceiling {ceiling:.0%}", "capacity"))
    return problems


def check_goal_scope(cluster: Cluster, final: Placement, options: PlanOptions) -> list[Problem]:
    """What a built-in goal may change: nothing outside its scope.

    add-brokers only moves replicas onto the given brokers; remove-brokers only moves replicas
    off them and leaves none; rack-repair only touches partitions that shared a rack; disks only
    changes log dirs; replication-factor only touches its topics.
    """
    problems: list[Problem] = []
    goal = options.goal
    target = set(options.brokers)
    topics = set(options.topics)
    for p, (reps, dirs) in zip(cluster.partitions, final):
        old, new = set(p.replicas), set(reps)
        changed = tuple(reps) != p.replicas or tuple(dirs) != p.log_dirs
        if goal == "remove-brokers":
            left = new & target
            if left:
                problems.append(Problem(p.name, f"still has replicas on drained brokers {sorted(left)}",
                                        "goal_not_met"))
            if changed and not (old & target):
                problems.append(Problem(p.name, "changed but has no replica on a drained broker",
                                        "out_of_scope"))
        elif goal == "add-brokers":
            added = new - old
            if added - target:
                problems.append(Problem(p.name, f"gains replicas on {sorted(added - target)}, "
                                                "which are not brokers being added", "out_of_scope"))
            if changed and not (new & target):
                problems.append(Problem(p.name, "changed but has no replica on a new broker",
                                        "out_of_scope"))
        elif goal == "disks":
            if tuple(reps) != p.replicas:
                problems.append(Problem(p.name, "disks goal changed the replica list", "out_of_scope"))
        elif goal == "replication-factor":
            if changed and topics and p.topic not in topics:
                problems.append(Problem(p.name, "topic not in the replication-factor scope",
                                        "out_of_scope"))
            if changed and not (old <= new or new <= old):
                problems.append(Problem(p.name, "replicas were swapped, not only added or removed",
                                        "out_of_scope"))
        elif goal == "rack-repair":
            if changed and len({cluster.rack_of(r) for r in p.replicas}) >= min(
                    len(p.replicas), len(cluster.racks)):
                problems.append(Problem(p.name, "changed although its replicas were already on "
                                                "distinct racks", "out_of_scope"))
    return problems
