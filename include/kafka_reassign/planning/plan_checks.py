"""Validate a reassignment plan against a cluster, before any write.

No I/O: everything is checked against a :class:`~kafka_reassign.cluster.state.ClusterState`.
Every problem is collected (not just the first) and each names the exact entry and the
reason, e.g. ``partitions[3] (orders-7): broker 9 does not exist (brokers: 1, 2, 3, 4)``.

A plan whose every partition is already at its target is not an error: it is a no-op (a
re-run of a finished plan) and the first warning says "nothing to move". A plan entry may
carry ``original_replicas`` (the placement the planner started from); when the live
placement differs (and the partition is neither at its target nor moved by a run of ours)
the plan is stale and refused, listing the partitions that changed.

Kinds of rejection (``Problem.kind``): not_json, not_object, bad_version, bad_partitions,
bad_entry, bad_topic, bad_partition_id, bad_replicas, bad_broker_id, bad_log_dirs,
empty_plan, duplicate_entry, internal_topic, unknown_topic, unknown_partition,
empty_replicas, duplicate_replicas, unknown_broker, broker_not_alive, rf_change,
below_min_isr, log_dirs_length, unknown_log_dir, partition_offline, in_flight_foreign,
foreign_in_flight_elsewhere, stale_plan. Run parameters are checked by
:mod:`kafka_reassign.planning.validate`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kafka_reassign.cluster.state import ClusterState, InFlight, PartitionInfo, TopicPartition
from kafka_reassign.errors import PlanValidationError, Problem
from kafka_reassign.planning.plan import ANY_LOG_DIR, PartitionMove, ReassignmentPlan, parse_plan_entries
from kafka_reassign.execution.ownership import SubmittedTargets, is_ours
from kafka_reassign.units import fmt_ids


def _on_the_way(now: tuple[int, ...], original: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``now`` is ``original``, ``target`` or a placement between them that the KIP-435
    steps of this move could have left (a resumed run): only brokers of either, every broker
    of both still there, and not merely one of the two reordered (a new preferred leader)."""
    if now in (tuple(original), tuple(target)):
        return True
    have, orig, tgt = set(now), set(original), set(target)
    return have <= orig | tgt and orig & tgt <= have and have != orig and have != tgt


def _short_names(items: list[str], limit: int = 20) -> str:
    more = f"; ... ({len(items)} in all)" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def _short_list(ids: Iterable[int], limit: int = 12) -> str:
    ids = sorted(ids)
    s = ", ".join(str(i) for i in ids[:limit])
    return s + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


@dataclass(frozen=True)
class _Options:
    """What the caller of :func:`validate_plan` allows, and who is asking."""

    allow_rf_change: bool
    allow_internal_topics: bool
    own_targets: SubmittedTargets | None
    who: str


@dataclass
class _Findings:
    """What the checks found so far: problems refuse the plan, warnings do not.

    :param stale: one line per partition whose live placement left the plan's starting one
    :param changes: partitions the plan would change (0 = the plan is a no-op)
    """

    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    changes: int = 0

    def problem(self, where: str, message: str, kind: str) -> None:
        self.problems.append(Problem(where, message, kind))


def _empty_plan(found: _Findings) -> None:
    found.problem("partitions", "the plan is empty: no partition to move", "empty_plan")


def _read_moves(plan: ReassignmentPlan | dict[str, Any] | str,
                found: _Findings) -> tuple[list[PartitionMove], list[str]]:
    """The plan's moves and their ``partitions[i] (orders-7)`` names; structural problems go to
    ``found`` (raised at once when the text is not JSON or the plan lists no partition)."""
    if isinstance(plan, ReassignmentPlan):
        moves = list(plan.moves)
        if not moves:
            _empty_plan(found)
        return moves, [f"partitions[{i}] ({m.name})" for i, m in enumerate(moves)]
    raw: Any = plan
    if isinstance(raw, (str, bytes)):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise PlanValidationError([Problem("plan", f"not valid JSON: {exc}", "not_json")]) from None
    entries, parse_problems = parse_plan_entries(raw)
    found.problems.extend(parse_problems)
    if isinstance(raw, dict) and isinstance(raw.get("partitions"), list) and not raw["partitions"]:
        _empty_plan(found)
        raise PlanValidationError(found.problems)
    return [m for _, m in entries], [f"partitions[{i}] ({m.name})" for i, m in entries]


def _check_target_brokers(name: str, target: tuple[int, ...], state: ClusterState, found: _Findings) -> None:
    """Each target broker listed once, existing and alive."""
    dups = sorted({b for b in target if target.count(b) > 1})
    if dups:
        found.problem(name, f"broker {_short_list(dups)} listed more than once in replicas {fmt_ids(target)}",
                      "duplicate_replicas")
    for b in dict.fromkeys(target):
        info = state.brokers.get(b)
        if info is None:
            found.problem(name, f"broker {b} does not exist (brokers: {_short_list(state.brokers)})",
                          "unknown_broker")
        elif not info.alive:
            found.problem(name, f"broker {b} is not alive: the move could not complete until it is back",
                          "broker_not_alive")


def _check_log_dirs(name: str, move: PartitionMove, state: ClusterState, found: _Findings) -> None:
    """One log dir per replica, each a log dir of its (live, known) broker or ``any``."""
    if move.log_dirs is None:
        return
    target = move.replicas
    if len(move.log_dirs) != len(target):
        found.problem(name, f"log_dirs has {len(move.log_dirs)} entries but replicas has {len(target)}",
                      "log_dirs_length")
        return
    for b, d in zip(target, move.log_dirs):
        info = state.brokers.get(b)
        if d == ANY_LOG_DIR or info is None or not info.alive or not info.log_dirs:
            continue
        if d not in info.log_dirs:
            found.problem(name, f"log dir {d!r} is not a log dir of broker {b} "
                                f"(it has {', '.join(info.log_dirs)})", "unknown_log_dir")


def _check_cordons(name: str, move: PartitionMove, part: PartitionInfo, base: tuple[int, ...],
                   state: ClusterState, found: _Findings) -> None:
    """Refuse a new replica on a broker whose log dirs are all cordoned, or on a cordoned log dir
    (KIP-1066): the operator asked Kafka to place nothing new there, and so do we."""
    for b in move.replicas:
        info = state.brokers.get(b)
        if info is not None and info.cordoned and b not in base:
            found.problem(name, f"broker {b} is cordoned (cordoned.log.dirs covers all its log dirs): it takes no "
                                "new replica; choose another broker or `kafka-reassign uncordon` it first",
                          "cordoned_broker")
    for b, d in move.wanted_dirs().items():
        info = state.brokers.get(b)
        if info is not None and d in info.cordoned_dirs and part.replica_dirs.get(b) != d \
                and not (info.cordoned and b not in base):  # that one is reported just above
            open_dirs = ", ".join(x for x in info.log_dirs if x not in info.cordoned_dirs) or "none"
            found.problem(name, f"log dir {d!r} of broker {b} is cordoned: it takes no new replica "
                                f"(dirs not cordoned: {open_dirs})", "cordoned_log_dir")


def _check_copies(name: str, move: PartitionMove, part: PartitionInfo, base: tuple[int, ...],
                  min_isr: int, state: ClusterState, found: _Findings) -> None:
    """A move needs a live copy to move from; one that adds replicas under min ISR is warned about."""
    target = move.replicas
    live_current = [b for b in part.replicas if b not in part.offline and state.brokers.get(b, None)
                    is not None and state.brokers[b].alive]
    adds = [b for b in target if b not in base]
    if part.leader < 0 or not live_current:
        if adds or tuple(target) != part.replicas:
            found.problem(name, f"all replicas of {move.name} are offline (replicas {fmt_ids(part.replicas)}, "
                                "leader none): there is no copy to move from", "partition_offline")
    elif adds and len(part.isr) < min_isr:
        found.warnings.append(f"{name}: {move.name} is under min ISR now (ISR {fmt_ids(part.isr)}, "
                              f"min.insync.replicas={min_isr}); the first step adds replicas to restore it")


def _check_ownership(name: str, move: PartitionMove, part: PartitionInfo, inflight: InFlight | None,
                     opts: _Options, found: _Findings) -> None:
    """Refuse a partition someone else is reassigning; note one the plan was not made from."""
    own_move = inflight is not None and is_ours(move.key, inflight, opts.own_targets)
    if inflight is not None and not own_move:
        found.problem(name, f"{move.name} is already being reassigned to {fmt_ids(inflight.target)} by someone "
                            f"else (no record of {opts.who} or an earlier run of ours submitting it); wait for "
                            "it to finish or have its owner cancel it", "in_flight_foreign")
    if move.original_replicas is not None and not own_move \
            and not _on_the_way(part.replicas, move.original_replicas, move.replicas):
        found.stale.append(f"{move.name} {fmt_ids(move.original_replicas)} -> now {fmt_ids(part.replicas)}")


def _warn_racks(name: str, target: tuple[int, ...], state: ClusterState, found: _Findings) -> None:
    """Warn when the target crowds fewer racks than it could use."""
    racks = [state.brokers[b].rack for b in target if b in state.brokers]
    used = {r for r in racks if r is not None}
    if len(racks) != len(target) or None in racks or len(used) >= len(target):
        return  # every replica on its own rack (or racks unknown): the cluster's racks need not be counted
    all_racks = {b.rack for b in state.brokers.values() if b.alive and b.rack is not None}
    if len(used) < len(all_racks):
        found.warnings.append(f"{name}: target {fmt_ids(target)} puts its {len(target)} replicas in "
                              f"{len(used)} rack(s) ({', '.join(sorted(used))}) although "
                              f"{len(all_racks)} racks are available: losing one rack loses more than one copy")


def _find_partition(name: str, move: PartitionMove, state: ClusterState, opts: _Options,
                    found: _Findings) -> PartitionInfo | None:
    """The live partition the move is for, or None (with the problem noted) when there is none."""
    if state.is_internal(move.topic) and not opts.allow_internal_topics:
        found.problem(name, f"{move.topic} is an internal topic; moving it needs allow_internal_topics",
                      "internal_topic")
    topic = state.topics.get(move.topic)
    if topic is None:
        found.problem(name, f"unknown topic {move.topic!r}", "unknown_topic")
        return None
    part = topic.partitions.get(move.partition)
    if part is None:
        n = len(topic.partitions)
        found.problem(name, f"unknown partition: {move.topic} has {n} partition"
                            f"{'s' if n != 1 else ''} (0..{n - 1})", "unknown_partition")
    return part


def _check_move(name: str, move: PartitionMove, state: ClusterState, opts: _Options, found: _Findings) -> None:
    """Every check of one plan entry against the live cluster."""
    part = _find_partition(name, move, state, opts, found)
    if part is None:
        return
    target = move.replicas
    if not target:
        found.problem(name, "replicas is empty: a partition needs at least one replica", "empty_replicas")
        return
    _check_target_brokers(name, target, state, found)
    inflight = state.in_flight.get(move.key)
    # During a reassignment the metadata lists old + new replicas; compare with where it was.
    base = tuple(inflight.original) if inflight is not None else part.replicas
    if len(target) != len(base) and not opts.allow_rf_change:
        found.problem(name, f"replication factor change {len(base)} -> {len(target)} "
                            f"({fmt_ids(base)} -> {fmt_ids(target)}) needs allow_rf_change", "rf_change")
    min_isr = state.min_isr(move.topic)
    if len(set(target)) < min_isr:
        found.problem(name, f"would leave {len(set(target))} replica(s), fewer than min.insync.replicas="
                            f"{min_isr}: producers with acks=all would fail", "below_min_isr")
    _check_log_dirs(name, move, state, found)
    _check_cordons(name, move, part, base, state, found)
    _check_copies(name, move, part, base, min_isr, state, found)
    _check_ownership(name, move, part, inflight, opts, found)
    _warn_racks(name, target, state, found)
    dirs_ok = all(part.replica_dirs.get(b) == d for b, d in move.wanted_dirs().items())
    if tuple(target) == part.replicas and inflight is None and dirs_ok:
        found.warnings.append(f"{name}: {move.name} is already at its target {fmt_ids(target)}; skipped")
    else:
        found.changes += 1


def _check_in_flight_elsewhere(moves: list[PartitionMove], state: ClusterState, opts: _Options,
                               found: _Findings) -> None:
    """Refuse while any partition outside the plan is being reassigned (the throttle is shared)."""
    if not state.in_flight:
        return  # the usual case: the plan's keys (a hundred thousand) need not be gathered
    plan_keys = {m.key for m in moves}
    for (t, p), inflight in sorted(state.in_flight.items()):
        if (t, p) in plan_keys:
            continue
        who_else = ("by an earlier run of this project (its record lists the move), not in this plan"
                    if is_ours((t, p), inflight, opts.own_targets) else
                    "by someone else (not in this plan)")
        found.problem(f"{t}-{p}", f"{t}-{p} is being reassigned to {fmt_ids(inflight.target)} {who_else}; two "
                                  "reassignments at once fight over the throttle: wait for it or cancel it",
                      "foreign_in_flight_elsewhere")


def validate_plan(plan: ReassignmentPlan | dict[str, Any] | str, state: ClusterState, *,
                  allow_rf_change: bool = False, own_run_id: str | None = None,
                  allow_internal_topics: bool = False,
                  own_targets: SubmittedTargets | None = None,
                  refuse_foreign_in_flight: bool = True) -> list[str]:
    """Check ``plan`` against ``state``; raise listing every problem, or return warnings.

    :param plan: a parsed plan, or the raw JSON object/text (structural problems are then
        reported together with the cluster problems)
    :param state: the cluster as it is now
    :param allow_rf_change: accept moves whose replica count differs from the current one
    :param own_run_id: the run validating (named in messages about in-flight moves)
    :param allow_internal_topics: accept moves of __consumer_offsets and other internal topics
    :param own_targets: targets this run already submitted (adopted on resume)
    :param refuse_foreign_in_flight: also refuse when someone else is reassigning *other*
        partitions of the cluster (two tools reassigning at once fight over the throttle)
    :raises PlanValidationError: with every problem found; nothing has been written
    :returns: warnings (non-fatal: under-replicated partitions, partitions already at target)
    """
    return validated_plan(plan, state, allow_rf_change=allow_rf_change, own_run_id=own_run_id,
                          allow_internal_topics=allow_internal_topics, own_targets=own_targets,
                          refuse_foreign_in_flight=refuse_foreign_in_flight)[1]


def validated_plan(plan: ReassignmentPlan | dict[str, Any] | str, state: ClusterState, *,
                   allow_rf_change: bool = False, own_run_id: str | None = None,
                   allow_internal_topics: bool = False,
                   own_targets: SubmittedTargets | None = None,
                   refuse_foreign_in_flight: bool = True) -> tuple[ReassignmentPlan, list[str]]:
    """:func:`validate_plan`, which also returns the plan it checked: a plan given parsed as is, a
    JSON object as parsed here (prepare parsed a 100k-move plan twice), text by ``from_json``.

    :raises PlanValidationError: as :func:`validate_plan`
    :returns: (the plan, warnings)
    """
    found = _Findings()
    moves, names = _read_moves(plan, found)
    opts = _Options(allow_rf_change=allow_rf_change, allow_internal_topics=allow_internal_topics,
                    own_targets=own_targets, who=f"run {own_run_id}" if own_run_id else "this run")
    seen: dict[TopicPartition, str] = {}
    for move, name in zip(moves, names):
        key = move.key
        if key in seen:
            found.problem(name, f"duplicate entry: {move.name} is also at {seen[key].split(' ')[0]}",
                          "duplicate_entry")
            continue
        seen[key] = name
        _check_move(name, move, state, opts, found)
    if refuse_foreign_in_flight:
        _check_in_flight_elsewhere(moves, state, opts, found)
    if found.stale:
        found.problem("partitions", f"stale plan: {len(found.stale)} partition(s) changed since the plan was "
                                    f"made (plan's starting replicas -> live): {_short_names(found.stale)}; "
                                    "make the plan again from a fresh snapshot", "stale_plan")
    if moves and found.changes == 0 and not found.problems:
        found.warnings.insert(0, f"nothing to move: every partition of the plan is already at its target "
                                 f"({len(moves)} partition(s)); no change is made")
    if found.problems:
        raise PlanValidationError(found.problems)
    if isinstance(plan, ReassignmentPlan):
        return plan, found.warnings
    # An object without problems parsed whole; text goes through from_json, which also reads
    # kafka-reassign-partitions.sh --generate output.
    return (ReassignmentPlan(moves) if isinstance(plan, dict) else ReassignmentPlan.from_json(plan)), found.warnings
