"""Hard constraints every plan must satisfy, checked on the final assignment.

The goals are built to respect these rules move by move; this module checks the result once
more, independently, so that a bug in a goal or a user's assignor can never produce a plan that
puts two replicas in one rack when racks allow otherwise, fills a disk past the ceiling, or
touches an excluded topic or broker. Tests use the same checks.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.planning.spark.cluster import Cluster, Partition
from kafka_reassign.errors import Problem

Placement = Sequence[tuple[Sequence[int], Sequence[str]]]
EPS = 1.0  # bytes; loads are sums of floats


def check_constraints(cluster: Cluster, final: Placement, options: PlanOptions,
                      allow_rf_change: bool = False) -> list[Problem]:
    """Every rule broken by ``final`` (one problem per partition / broker / log dir).

    :param final: (replicas, log dirs) per partition index
    :param allow_rf_change: whether a partition may change its number of replicas
    """
    excluded_brokers = set(options.exclude_brokers)
    racks_all = {cluster.rack_of(b) for b in cluster.brokers if b not in excluded_brokers}
    drained = set(options.brokers) if options.goal == "remove-brokers" else set()
    n_racks = len({cluster.rack_of(b) for b in cluster.brokers
                   if b not in excluded_brokers and b not in drained}) or len(racks_all) or 1
    rules = _Rules(excluded_topics=frozenset(options.exclude_topics), excluded_brokers=frozenset(excluded_brokers),
                   allow_rf_change=allow_rf_change, n_racks=n_racks)
    problems: list[Problem] = []
    for p, (reps, dirs) in zip(cluster.partitions, final):
        if tuple(reps) != p.replicas or tuple(dirs) != p.log_dirs:
            problems.extend(_moved_partition_problems(cluster, p, reps, rules))
            problems.extend(_cordon_problems(cluster, p, reps, dirs))
    problems.extend(_capacity_problems(cluster, _Loads.of(cluster, final), options.capacity_ceiling))
    return problems


@dataclass(frozen=True)
class _Rules:
    """What a changed partition must respect.

    :param n_racks: racks a partition can spread over (the brokers not excluded nor drained)
    """

    excluded_topics: frozenset[str]
    excluded_brokers: frozenset[int]
    allow_rf_change: bool
    n_racks: int


@dataclass
class _Loads:
    """Bytes per broker and per (broker, log dir), before and after a placement."""

    before_bytes: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    after_bytes: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    before_dir: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    after_dir: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))

    @classmethod
    def of(cls, cluster: Cluster, final: Placement) -> "_Loads":
        loads = cls()
        for p, (reps, dirs) in zip(cluster.partitions, final):
            for r, d in zip(p.replicas, p.log_dirs):
                loads.before_bytes[r] += p.size_bytes
                loads.before_dir[(r, d)] += p.size_bytes
            for r, d in zip(reps, dirs):
                loads.after_bytes[r] += p.size_bytes
                loads.after_dir[(r, d)] += p.size_bytes
        return loads


def _moved_partition_problems(cluster: Cluster, p: Partition, reps: Sequence[int], rules: _Rules) -> list[Problem]:
    """The rules one changed partition breaks: exclusions, brokers, replication factor, racks."""
    problems: list[Problem] = []
    name = p.name
    if p.topic in rules.excluded_topics:
        problems.append(Problem(name, f"topic {p.topic} is excluded but the plan changes it", "excluded_topic"))
    if len(set(reps)) != len(reps):
        problems.append(Problem(name, f"replicas {list(reps)} name a broker twice", "duplicate_broker"))
    unknown = [r for r in reps if r not in cluster.brokers]
    if unknown:
        problems.append(Problem(name, f"unknown brokers {unknown}", "unknown_broker"))
        return problems
    if not rules.allow_rf_change and len(reps) != len(p.replicas):
        problems.append(Problem(name, f"replication factor changes from {len(p.replicas)} to {len(reps)}",
                                "rf_change"))
    touched_excluded = (set(p.replicas) ^ set(reps)) & rules.excluded_brokers
    if touched_excluded:
        problems.append(Problem(name, f"excluded brokers {sorted(touched_excluded)} gain or lose a replica",
                                "excluded_broker"))
    before_racks = len({cluster.rack_of(r) for r in p.replicas})
    after_racks = len({cluster.rack_of(r) for r in reps})
    want = min(before_racks + max(0, len(reps) - len(p.replicas)), len(reps), rules.n_racks)
    if after_racks < want:
        problems.append(Problem(name, f"replicas {list(reps)} span {after_racks} racks where {want} are possible",
                                "rack"))
    return problems


def _cordon_problems(cluster: Cluster, p: Partition, reps: Sequence[int], dirs: Sequence[str]) -> list[Problem]:
    """A replica placed anew on a cordoned log dir (KIP-1066), or on a broker whose dirs are all cordoned."""
    was = dict(zip(p.replicas, p.log_dirs))
    bad = []
    for r, d in zip(reps, dirs):
        broker = cluster.brokers.get(r)
        if broker is None or was.get(r) == d:
            continue  # unknown brokers are reported above; a replica staying where it is may stay
        if broker.cordoned and r not in was:
            bad.append(f"broker {r} (all its log dirs cordoned)")
        elif any(x.path == d and x.cordoned for x in broker.log_dirs):
            bad.append(f"cordoned log dir {d} of broker {r}")
    if not bad:
        return []
    return [Problem(p.name, f"places a replica on {', '.join(bad)}", "cordoned")]


def _capacity_problems(cluster: Cluster, loads: _Loads, ceiling: float) -> list[Problem]:
    """Brokers and log dirs a placement fills past ``ceiling`` (only those it adds bytes to)."""
    problems: list[Problem] = []
    for b, after in loads.after_bytes.items():
        cap = cluster.brokers[b].capacity_bytes if b in cluster.brokers else None
        if cap and after > loads.before_bytes.get(b, 0.0) + EPS and after > cap * ceiling + EPS:
            problems.append(Problem(f"broker {b}", f"would hold {after / cap:.1%} of its capacity, above "
                                                   f"the ceiling {ceiling:.0%}", "capacity"))
    for (b, d), after in loads.after_dir.items():
        if b not in cluster.brokers:
            continue
        caps = {x.path: x.capacity_bytes for x in cluster.brokers[b].log_dirs}
        cap = caps.get(d)
        if cap is None:
            problems.append(Problem(f"broker {b}", f"log dir {d} does not exist", "unknown_log_dir"))
        elif after > loads.before_dir.get((b, d), 0.0) + EPS and after > cap * ceiling + EPS:
            problems.append(Problem(f"broker {b} log dir {d}", f"would hold {after / cap:.1%} of its "
                                    f"capacity, above the ceiling {ceiling:.0%}", "capacity"))
    return problems


def check_goal_scope(cluster: Cluster, final: Placement, options: PlanOptions) -> list[Problem]:
    """What a built-in goal may change: nothing outside its scope.

    add-brokers only moves replicas onto the given brokers; remove-brokers only moves replicas
    off them and leaves none; rack-repair only touches partitions that shared a rack; disks only
    changes log dirs; replication-factor only touches its topics; disk-threshold only moves
    replicas off log dirs above its threshold.
    """
    goal = options.goal
    if goal == "disk-threshold":
        from kafka_reassign.planning.spark.goals.disk_threshold import scope_problems
        return scope_problems(cluster, final, options)
    problems: list[Problem] = []
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
