"""KIP-73 replication throttles: which replicas, which rates, merge, record, restore.

What gets throttled (as kafka-reassign-partitions.sh does it):

* topic config ``leader.replication.throttled.replicas``: ``partition:broker`` for every
  *existing* replica of a moving partition (any of them may be the leader the new replica
  fetches from);
* topic config ``follower.replication.throttled.replicas``: ``partition:broker`` for every
  *new* replica (the move destinations);
* broker configs ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` on every broker that sends or receives;
* broker config ``replica.alter.log.dirs.io.max.bytes.per.second`` on brokers that move a
  replica between their own log dirs (KIP-113).

Merging with throttles someone else already set (documented operator contract):

* replica lists: the union of theirs and ours; ``*`` (throttle everything) stays ``*``;
* rates: the *lower* of theirs and ours. A rate already on a broker was set by someone
  protecting that broker (or by a previous tool); raising it behind their back could hurt
  clients, while lowering it to ours is what our run asked for. When theirs is lower, we
  leave it and say so in the notes (the move will be slower than estimated).
* a rate a broker inherits (the cluster-wide default, ``kafka-configs --entity-default``, or
  its server.properties) is theirs too: when lower than ours nothing is written for that
  broker and key; when higher, a per-broker value of ours overrides it for the run (prior
  "not set"), and the restore deletes that override, leaving the inherited value in force.

Every change records the value before it (``prior``, None = not set). Restoring undoes only
the run's own contribution, relative to the value found then: entries we added to a replica
list are removed (entries someone else added since are kept); a rate goes back to its prior
value only while it still holds ours (a value someone else set during the run is theirs, so
it is kept, with a warning). When nobody else touched a key, the prior value comes back
exactly, or the key is DELETEd when we added it. Applying twice changes nothing the second
time; restoring twice is a no-op.
"""
from __future__ import annotations

import functools

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

# Where a broker value comes from is read in cluster/; re-exported for the throttle's callers.
from kafka_reassign.cluster.config_source import CLUSTER_DEFAULT, INHERITED_SOURCES, STATIC_CONFIG, Inherited
from kafka_reassign.units import fmt_bytes

log = logging.getLogger(__name__)

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"

TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)
LIST_KEYS = frozenset(TOPIC_KEYS)
WILDCARD = "*"

ConfigKey = tuple[str, str]  # (resource_type "broker"|"topic", name)

#: (resource_type, name) -> {key: inherited value} (brokers only; keys without one are absent)
InheritedConfigs = Mapping[ConfigKey, Mapping[str, Inherited]]


@dataclass(frozen=True)
class ConfigChange:
    """One incremental config write (SET when ``value`` is a string, DELETE when None).

    :param resource_type: "broker" or "topic"
    :param name: broker id as a string, or topic name
    :param key: config key
    :param prior: value before the change (None = not set)
    :param value: value after the change (None = delete the key)
    :param inherited: the broker's inherited value in force when ``prior`` is None (a cluster
        default our value overrides for the run): for reports only, not part of equality
    """

    resource_type: str
    name: str
    key: str
    prior: str | None
    value: str | None
    inherited: Inherited | None = field(default=None, compare=False)

    @property
    def op(self) -> str:
        return "DELETE" if self.value is None else "SET"

    @property
    def resource(self) -> ConfigKey:
        return (self.resource_type, self.name)

    def describe(self) -> str:
        """One line for dry-run reports and logs."""
        what = f"{self.resource_type} {self.name}: {self.key}"
        prior = "(not set)" if self.prior is None else repr(self.prior)
        if self.prior is None and self.inherited is not None:
            prior += f", {self.inherited.label} {self.inherited.value!r} in force"
        if self.value is None:
            return f"DELETE {what} (was {prior})"
        return f"SET    {what} = {self.value!r} (was {prior})"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"resource_type": self.resource_type, "name": self.name, "key": self.key,
                               "prior": self.prior, "value": self.value}
        if self.inherited is not None:
            out["inherited"] = self.inherited.to_json()
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ConfigChange":
        return cls(resource_type=d["resource_type"], name=str(d["name"]), key=d["key"],
                   prior=d.get("prior"), value=d.get("value"), inherited=Inherited.from_json(d.get("inherited")))


def parse_replica_list(value: str | None) -> set[tuple[int, int]] | str:
    """``"0:1,0:2"`` -> {(0, 1), (0, 2)}; ``"*"`` -> "*"; None/"" -> empty set.

    Unparseable entries are kept out but never lost: callers compare the raw string first.
    """
    parsed = _parsed_list(value)
    return parsed if isinstance(parsed, str) else set(parsed)


def replica_set(value: str | None) -> frozenset[tuple[int, int]] | str:
    """:func:`parse_replica_list` read-only: the cached parse itself, not a copy (the executor's
    list updates only combine sets). A value this process formatted is known without a parse:
    each refill reads back the lists the last one wrote."""
    known = _FORMATTED.get(value) if value is not None else None
    return known if known is not None else _parsed_list(value)


@functools.lru_cache(maxsize=4096)
def _parsed_list(value: str | None) -> frozenset[tuple[int, int]] | str:
    """:func:`parse_replica_list`'s parse, once per distinct value (an unparseable entry is so
    logged once): each refill of the executor reads a topic's lists (now, before the run, last
    written) several times over, and they hold an entry per replica in flight. Sized for a
    plan over a few hundred topics: two lists each, a few values of each alive at once."""
    if value is None:
        return frozenset()
    value = value.strip()
    if value == WILDCARD:
        return WILDCARD
    out: set[tuple[int, int]] = set()
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        sep = ":" if ":" in item else "-"   # very old tools wrote "partition-broker"
        p, _, b = item.partition(sep)
        try:
            out.add((int(p), int(b)))
        except ValueError:
            log.warning("ignoring unparseable throttled replica entry %r", item)
    return frozenset(out)


#: Values :func:`format_replica_list` made, with their entries (what parsing them gives back).
_FORMATTED: dict[str, frozenset[tuple[int, int]]] = {}
#: Values kept before they are all forgotten: a few per topic of a plan over a few hundred topics.
_FORMATTED_MAX = 8192


def format_replica_list(entries: Iterable[tuple[int, int]]) -> str:
    kept = entries if isinstance(entries, frozenset) else frozenset(entries)
    value = ",".join(f"{p}:{b}" for p, b in sorted(kept))
    if len(_FORMATTED) >= _FORMATTED_MAX:
        _FORMATTED.clear()
    _FORMATTED[value] = kept
    return value


@dataclass
class ThrottleSpec:
    """What a run wants throttled (before merging with what is already set).

    :param leader: topic -> {(partition, broker)} existing replicas of moving partitions
    :param follower: topic -> {(partition, broker)} new replicas
    :param rate: bytes/s for leader and follower rates, None = no replication throttle
    :param rate_brokers: brokers that send or receive replicated data
    :param log_dir_rate: bytes/s for intra-broker log-dir moves, None = not throttled
    :param log_dir_brokers: brokers with log-dir moves
    """

    leader: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    follower: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    rate: int | None = None
    rate_brokers: set[int] = field(default_factory=set)
    log_dir_rate: int | None = None
    log_dir_brokers: set[int] = field(default_factory=set)

    @classmethod
    def for_moves(cls, moves: Iterable[Any], rate: int | None,
                  log_dir_rate: int | None = None, replica_lists: bool = True) -> "ThrottleSpec":
        """Throttle set for steps (anything with topic, partition, current, target[, log_dirs]).

        Steps that copy no data (drops, reorders) need no throttle and are left out.

        :param moves: :class:`~kafka_reassign.execution.steps.StepMove` objects (all batches of a run)
        :param rate: replication throttle in bytes/s, or None for none
        :param log_dir_rate: log-dir move throttle in bytes/s (None: use ``rate``)
        :param replica_lists: also list the throttled replicas (``leader``, ``follower``); False: the
            rates and their brokers only (``leader`` and ``follower`` empty)
        """
        spec = cls(rate=rate, log_dir_rate=log_dir_rate if log_dir_rate is not None else rate)
        for m in moves:
            current, target = tuple(m.current), tuple(m.target)
            added = [b for b in target if b not in current]
            if added and rate is not None:
                if replica_lists:
                    spec.leader.setdefault(m.topic, set()).update((m.partition, b) for b in current)
                    spec.follower.setdefault(m.topic, set()).update((m.partition, b) for b in added)
                spec.rate_brokers.update(current)
                spec.rate_brokers.update(target)
            log_dirs = getattr(m, "log_dirs", None)
            if log_dirs and current == target and spec.log_dir_rate is not None:
                spec.log_dir_brokers.update(b for b, d in zip(target, log_dirs) if d != "any")
        return spec

    @property
    def empty(self) -> bool:
        return not (self.leader or self.follower or self.rate_brokers or self.log_dir_brokers)

    def resources(self) -> tuple[list[int], list[str]]:
        """(broker ids, topics) whose configs must be read before merging."""
        brokers = sorted(self.rate_brokers | self.log_dir_brokers)
        topics = sorted(set(self.leader) | set(self.follower))
        return brokers, topics

    def to_json(self) -> dict[str, Any]:
        return {"leader": {t: format_replica_list(v) for t, v in sorted(self.leader.items())},
                "follower": {t: format_replica_list(v) for t, v in sorted(self.follower.items())},
                "rate": self.rate, "rate_brokers": sorted(self.rate_brokers),
                "log_dir_rate": self.log_dir_rate, "log_dir_brokers": sorted(self.log_dir_brokers)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ThrottleSpec":
        def lists(x: Mapping[str, str]) -> dict[str, set[tuple[int, int]]]:
            out: dict[str, set[tuple[int, int]]] = {}
            for t, v in x.items():
                parsed = parse_replica_list(v)
                out[t] = set() if isinstance(parsed, str) else parsed  # str: the wildcard
            return out
        return cls(leader=lists(d.get("leader", {})), follower=lists(d.get("follower", {})),
                   rate=d.get("rate"), rate_brokers=set(d.get("rate_brokers", [])),
                   log_dir_rate=d.get("log_dir_rate"), log_dir_brokers=set(d.get("log_dir_brokers", [])))


CurrentConfigs = Mapping[ConfigKey, Mapping[str, str | None]]


def _current(configs: CurrentConfigs, rtype: str, name: str, key: str) -> str | None:
    return (configs.get((rtype, name)) or {}).get(key)


def _inherited(inherited: InheritedConfigs | None, rtype: str, name: str, key: str) -> Inherited | None:
    return ((inherited or {}).get((rtype, name)) or {}).get(key)


def effective_configs(current: CurrentConfigs, inherited: InheritedConfigs | None
                      ) -> dict[ConfigKey, dict[str, str | None]]:
    """What each resource enforces: its own value, else the value it inherits (brokers).

    :param current: per-resource values (None = not set)
    :param inherited: values in force without a per-broker one (cluster default, static)
    """
    out = {res: dict(vals) for res, vals in current.items()}
    for res, vals in (inherited or {}).items():
        mine = out.setdefault(res, {})
        for key, inh in vals.items():
            if mine.get(key) is None:
                mine[key] = inh.value
    return out


def _as_rate(value: str) -> int | None:
    try:
        return int(float(value))
    except ValueError:
        return None


def throttle_changes(spec: ThrottleSpec, current_configs: CurrentConfigs,
                     notes: list[str] | None = None,
                     inherited: InheritedConfigs | None = None) -> list[ConfigChange]:
    """The config writes that bring the cluster to ``spec`` merged with what is set now.

    :param spec: what the run wants throttled
    :param current_configs: (resource_type, name) -> {key: dynamic value or None}
    :param notes: if given, receives operator-facing notes (kept lower rates, wildcards)
    :param inherited: broker values in force without a per-broker one (a cluster default):
        theirs, like a per-broker value
    :returns: only the writes that change something (empty when already applied)
    """
    notes = notes if notes is not None else []
    changes: list[ConfigChange] = []
    for key, wanted in ((LEADER_REPLICAS, spec.leader), (FOLLOWER_REPLICAS, spec.follower)):
        for topic in sorted(wanted):
            if not wanted[topic]:
                continue
            existing = _current(current_configs, "topic", topic, key)
            parsed = parse_replica_list(existing)
            if isinstance(parsed, str):  # the wildcard
                notes.append(f"topic {topic}: {key} is '*' already (every replica throttled); left as is")
                continue
            union = parsed | wanted[topic]
            if existing is not None and union == parsed:
                continue
            changes.append(ConfigChange("topic", topic, key, existing, format_replica_list(union)))
    return changes + _rate_changes(spec, current_configs, inherited, notes)


def _rate_changes(spec: ThrottleSpec, current_configs: CurrentConfigs, inherited: InheritedConfigs | None,
                  notes: list[str]) -> list[ConfigChange]:
    """The broker rate writes of :func:`throttle_changes` (the lower of theirs and ours)."""
    changes: list[ConfigChange] = []
    rate_keys: list[tuple[str, int | None, set[int]]] = [
        (LEADER_RATE, spec.rate, spec.rate_brokers), (FOLLOWER_RATE, spec.rate, spec.rate_brokers),
        (LOG_DIR_RATE, spec.log_dir_rate, spec.log_dir_brokers)]
    for key, rate, brokers in rate_keys:
        if rate is None:
            continue
        for b in sorted(brokers):
            existing = _current(current_configs, "broker", str(b), key)
            # A per-broker value wins over an inherited one (Kafka's precedence): only without
            # one does the broker enforce the cluster default (or its static config).
            default = _inherited(inherited, "broker", str(b), key) if existing is None else None
            theirs_raw = existing if existing is not None else (default.value if default else None)
            theirs = _as_rate(theirs_raw) if theirs_raw is not None else None
            if theirs is not None and theirs <= rate:
                if theirs < rate:
                    what = f" ({default.label})" if default is not None else ""
                    notes.append(f"broker {b}: {key} is already {fmt_bytes(theirs)}/s{what}, lower than "
                                 f"ours ({fmt_bytes(rate)}/s); kept (moves through broker {b} will be "
                                 "slower than estimated)")
                continue
            changes.append(ConfigChange("broker", str(b), key, existing, str(rate), inherited=default))
    return changes


def _group_by_key(changes: Iterable[ConfigChange]) -> dict[tuple[str, str, str], list[ConfigChange]]:
    """Changes per (resource_type, name, key), oldest first (a key may be written several times)."""
    out: dict[tuple[str, str, str], list[ConfigChange]] = {}
    for c in changes:
        out.setdefault((c.resource_type, c.name, c.key), []).append(c)
    return out


def our_entries(changes: list[ConfigChange]) -> set[tuple[int, int]]:
    """Replica-list entries a run added: what each of its writes held beyond the value before it."""
    ours: set[tuple[int, int]] = set()
    for c in changes:
        value, prior = replica_set(c.value), replica_set(c.prior)  # the cached parses: only read
        if not isinstance(value, str):
            ours |= value - (prior if not isinstance(prior, str) else frozenset())
    return ours


def _restore_list(changes: list[ConfigChange], now: str | None) -> tuple[str | None, str | None]:
    """(value to leave, note or None) for a replica list: drop our entries, keep everyone else's."""
    first_prior = changes[0].prior
    now_set, prior_set = parse_replica_list(now), parse_replica_list(first_prior)
    if isinstance(now_set, str):  # the wildcard
        if prior_set == WILDCARD:
            return now, None
        return now, "is now '*' (set by someone else during the run): kept"
    left = now_set - our_entries(changes)
    if prior_set != WILDCARD and left == prior_set:
        return first_prior, None  # exactly as before the run
    desired = format_replica_list(left) if left else None
    theirs = left - (prior_set if isinstance(prior_set, set) else set())
    if theirs:
        note = f"has entries added by someone else during the run ({format_replica_list(theirs)}): kept"
    else:
        note = "lost entries it had before the run (someone else removed them during the run): not re-added"
    return desired, note


def _restore_value(changes: list[ConfigChange], now: str | None) -> tuple[str | None, str | None]:
    """(value to leave, note or None) for a rate: undo our writes newest first while ours is there."""
    value = now
    for i, c in enumerate(reversed(changes)):
        if value != c.value:
            if i == 0:
                return now, f"is {now!r}, not the {c.value!r} we wrote: someone else changed it during the run; kept theirs"
            return value, (f"was set to {value!r} by someone else during the run (the guard put ours back "
                           "while moves were in flight): restored to theirs")
        value = c.prior
    return value, None


def restore_changes(record: Any, current_configs: CurrentConfigs | None = None,
                    warnings: list[str] | None = None, *, log_warnings: bool = True) -> list[ConfigChange]:
    """The writes that undo a run's throttle changes, relative to the values now.

    Only the run's own contribution is undone: entries it added to a replica list are removed
    (entries others added since stay); a rate goes back to the value before the run only while
    it still holds the run's value (a value someone else set since is kept). Each kept value
    gives one warning. Writes that change nothing are left out, so restoring twice is a no-op.

    :param record: a :class:`~kafka_reassign.throttle.record.ThrottleRecord` or a list of ConfigChange
    :param current_configs: values now (None: as the run left them)
    :param warnings: receives one message per value someone else changed
    :param log_warnings: also log them (off for a check that writes nothing)
    """
    warnings = warnings if warnings is not None else []
    recorded: list[ConfigChange] = list(getattr(record, "changes", record))
    out: list[ConfigChange] = []
    for (rtype, name, key), changes in reversed(list(_group_by_key(recorded).items())):
        if current_configs is None:
            now = changes[-1].value
        else:
            now = _current(current_configs, rtype, name, key)
        undo = _restore_list if key in LIST_KEYS else _restore_value
        desired, note = undo(changes, now)
        if note:
            warnings.append(f"{rtype} {name} {key} {note}")
        if desired != now:
            out.append(ConfigChange(rtype, name, key, now, desired))
    for w in warnings if log_warnings else ():
        log.warning(w)
    return out


def leftovers(record: Any, current_configs: CurrentConfigs) -> list[ConfigChange]:
    """What of a run's throttle is still set now (empty once restored; others' values never count).

    :param record: a ThrottleRecord or a list of ConfigChange
    :param current_configs: values now
    :returns: the writes a restore would still make
    """
    # A check after the restore: a rate already back to its prior value would read as
    # "someone else changed it", which is not news worth a warning here.
    return restore_changes(record, current_configs, [], log_warnings=False)

