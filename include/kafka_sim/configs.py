"""Topic and broker config definitions, validation and DescribeConfigs resolution.

Follows Apache Kafka: types are parsed and range-checked the way ``ConfigDef`` does
(messages read ``Invalid value X for configuration K: reason``), values are stored in the
string form Kafka would describe them in (lists joined by ``,``, numbers canonical), and
``describe_*`` mark sources and synonyms the way ``ConfigHelper`` does (topic override
first, then per-broker dynamic, cluster-wide dynamic default, static, and static default;
``dropWhile(name != key)`` on the broker-synonym list).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Callable, Iterable, Mapping

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
INT_MAX = 2147483647
INT_MIN = -2147483648


class ConfigType(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigType`` (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource`` ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigValueError(ValueError):
    """A config value Kafka would reject (maps to INVALID_CONFIG)."""


Validator = Callable[[str, object], None]


@dataclass(frozen=True)
class ConfigKey:
    """One config definition.

    :param name: the config name
    :param type: its Kafka type
    :param default: Kafka's default in string form, None for a null default
    :param doc: one-line documentation
    :param validator: extra check on the parsed value, raises ConfigValueError
    :param dynamic: broker configs only: can be altered at runtime
    :param synonyms: topic configs only: the broker config names this one falls back to,
        with the factor converting the broker value into the topic's unit
    """

    name: str
    type: ConfigType
    default: str | None
    doc: str = ""
    validator: Validator | None = None
    dynamic: bool = False
    synonyms: tuple[tuple[str, int], ...] = ()
    sensitive: bool = False


@dataclass(frozen=True)
class ConfigSynonym:
    """One synonym of a described config (DescribeConfigs v1+)."""

    name: str
    value: str | None
    source: int


@dataclass
class ConfigEntry:
    """One described config, as DescribeConfigs returns it."""

    name: str
    value: str | None
    read_only: bool
    source: int
    is_sensitive: bool
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    config_type: int = ConfigType.UNKNOWN
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        """True when the value is Kafka's default (DescribeConfigs v0 field)."""
        return self.source == ConfigSource.DEFAULT_CONFIG


# ---------------------------------------------------------------- parsing

def _invalid(name: str, value: object, reason: str) -> ConfigValueError:
    return ConfigValueError(f"Invalid value {value} for configuration {name}: {reason}")


def split_list(raw: str) -> list[str]:
    """Split a LIST config the way ConfigDef does (comma with surrounding whitespace).

    :param raw: the string value
    """
    trimmed = raw.strip()
    if not trimmed:
        return []
    return [item.strip() for item in trimmed.split(",")]


def parse_value(key: ConfigKey, raw: str) -> object:
    """Parse and validate one value as Kafka's ConfigDef would.

    :param key: the definition
    :param raw: the string value from the request
    :raises ConfigValueError: with Kafka's wording
    """
    if raw is None:
        raise ConfigValueError(f"Invalid value null for configuration {key.name}: value must not be null")
    text = raw.strip()
    t = key.type
    value: object
    if t in (ConfigType.LONG, ConfigType.INT, ConfigType.SHORT):
        lo, hi, label = {
            ConfigType.LONG: (LONG_MIN, LONG_MAX, "LONG"),
            ConfigType.INT: (INT_MIN, INT_MAX, "INT"),
            ConfigType.SHORT: (-32768, 32767, "SHORT"),
        }[t]
        if not re.fullmatch(r"[+-]?\d+", text):
            raise _invalid(key.name, raw, f"Not a number of type {label}")
        value = int(text)
        if not lo <= value <= hi:
            raise _invalid(key.name, raw, f"Not a number of type {label}")
    elif t == ConfigType.DOUBLE:
        try:
            value = float(text)
        except ValueError:
            raise _invalid(key.name, raw, "Not a number of type DOUBLE") from None
        if math.isnan(value):
            raise _invalid(key.name, raw, "Not a number of type DOUBLE")
    elif t == ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(key.name, raw, "Expected value to be either true or false")
        value = text.lower() == "true"
    elif t == ConfigType.LIST:
        value = split_list(raw)
    else:
        value = text if t != ConfigType.PASSWORD else raw
    if key.validator is not None:
        key.validator(key.name, value)
    return value


def format_value(key: ConfigKey, value: object) -> str:
    """Kafka's ``ConfigDef.convertToString`` for a parsed value.

    :param key: the definition
    :param value: a value returned by parse_value
    """
    if key.type == ConfigType.LIST:
        return ",".join(value)  # type: ignore[arg-type]
    if key.type == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if key.type == ConfigType.DOUBLE:
        return repr(float(value))  # type: ignore[arg-type]
    return str(value)


def normalize(key: ConfigKey, raw: str) -> str:
    """Validate ``raw`` and return the string Kafka would describe.

    :param key: the definition
    :param raw: the string value from the request
    :raises ConfigValueError: on an invalid value
    """
    return format_value(key, parse_value(key, raw))


# ---------------------------------------------------------------- validators

def at_least(minimum: float) -> Validator:
    """ConfigDef.Range.atLeast."""

    def check(name: str, value: object) -> None:
        if value < minimum:  # type: ignore[operator]
            raise _invalid(name, value, f"Value must be at least {minimum}")

    return check


def between(lo: float, hi: float) -> Validator:
    """ConfigDef.Range.between."""

    def check(name: str, value: object) -> None:
        if not lo <= value <= hi:  # type: ignore[operator]
            raise _invalid(name, value, f"Value must be no less than {lo} and no more than {hi}")

    return check


def valid_string(*allowed: str) -> Validator:
    """ConfigDef.ValidString."""

    def check(name: str, value: object) -> None:
        if value not in allowed:
            raise _invalid(name, value, f"String must be one of: {', '.join(allowed)}")

    return check


def valid_list(*allowed: str) -> Validator:
    """ConfigDef.ValidList."""

    def check(name: str, value: object) -> None:
        for item in value:  # type: ignore[attr-defined]
            if item not in allowed:
                raise _invalid(name, item, f"String must be one of: {', '.join(allowed)}")

    return check


_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def throttled_replicas_validator(name: str, value: object) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` pairs.

    Whitespace around entries is tolerated; empty entries only at the end.
    """
    items = list(value)  # type: ignore[call-overload]
    if items == ["*"]:
        return
    seen_empty = False
    for item in items:
        if not item:
            seen_empty = True
        elif seen_empty or not _REPLICA.fullmatch(item):
            raise ConfigValueError(
                f"Invalid value {','.join(items)} for configuration {name}: {name} must be the literal '*' "
                "or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )


def parse_throttled_replicas(value: str | None) -> bool | frozenset[tuple[int, int]] | None:
    """Turn a throttled-replicas value into True (``*``), a set of (partition, broker), or None.

    :param value: the (already validated) config value, None when unset
    """
    if value is None:
        return None
    items = [i for i in split_list(value) if i]
    if items == ["*"]:
        return True
    pairs = frozenset((int(a), int(b)) for a, b in (i.split(":") for i in items))
    return pairs or None


# ---------------------------------------------------------------- definitions

_L = ConfigType.LONG
_I = ConfigType.INT
_B = ConfigType.BOOLEAN
_S = ConfigType.STRING
_LIST = ConfigType.LIST
_D = ConfigType.DOUBLE
_SHORT = ConfigType.SHORT

_RATE_DOC = "bytes/s; Long.MAX_VALUE means unthrottled"

_BROKER_KEYS: list[ConfigKey] = [
    # KIP-73 / KIP-113 quotas (DynamicConfig.Broker): dynamic, per broker or cluster default.
    ConfigKey("leader.replication.throttled.rate", _L, str(LONG_MAX),
              "Cap on leader-side traffic of throttled replicas, " + _RATE_DOC, at_least(0), dynamic=True),
    ConfigKey("follower.replication.throttled.rate", _L, str(LONG_MAX),
              "Cap on follower-side traffic of throttled replicas, " + _RATE_DOC, at_least(0), dynamic=True),
    ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", _L, str(LONG_MAX),
              "Cap on copying between log dirs of one broker (KIP-113), " + _RATE_DOC, at_least(0), dynamic=True),
    # Replication settings that are static in Kafka.
    ConfigKey("replica.lag.time.max.ms", _L, "30000",
              "A follower not caught up for this long is removed from the ISR", at_least(0)),
    ConfigKey("replica.fetch.max.bytes", _I, "1048576", "Bytes fetched per partition per request", at_least(0)),
    ConfigKey("num.partitions", _I, "1", "Default partition count of new topics", at_least(1)),
    ConfigKey("default.replication.factor", _I, "1", "Default replication factor of new topics"),
    ConfigKey("offsets.topic.replication.factor", _SHORT, "3", "Replication factor of __consumer_offsets",
              at_least(1)),
    ConfigKey("auto.create.topics.enable", _B, "false", "Auto-create topics on metadata requests (off here)"),
    ConfigKey("auto.leader.rebalance.enable", _B, "true", "Background preferred-leader balancing"),
    ConfigKey("leader.imbalance.check.interval.seconds", _L, "300",
              "How often the controller runs preferred-leader elections", at_least(1)),
    ConfigKey("replication.quota.window.num", _I, "11", "Samples kept by the replication quotas", at_least(1)),
    ConfigKey("replication.quota.window.size.seconds", _I, "1", "Length of one replication quota sample",
              at_least(1)),
    ConfigKey("delete.topic.enable", _B, "true", "Topics can be deleted"),
    # Dynamic thread pools (DynamicThreadPool).
    ConfigKey("num.io.threads", _I, "8", "Request handler threads", at_least(1), dynamic=True),
    ConfigKey("num.network.threads", _I, "3", "Network threads", at_least(1), dynamic=True),
    ConfigKey("num.replica.fetchers", _I, "1", "Replica fetcher threads per source broker", dynamic=True),
    ConfigKey("background.threads", _I, "10", "Background threads", at_least(1), dynamic=True),
    # Log defaults (DynamicLogConfig: all cluster-wide dynamic), synonyms of topic configs.
    ConfigKey("min.insync.replicas", _I, "1", "Minimum ISR size for acks=all produce", at_least(1), dynamic=True),
    ConfigKey("log.retention.ms", _L, None, "Retention time (ms); overrides minutes and hours", dynamic=True),
    ConfigKey("log.retention.minutes", _I, None, "Retention time (minutes); overrides hours", dynamic=True),
    ConfigKey("log.retention.hours", _I, "168", "Retention time (hours)", dynamic=True),
    ConfigKey("log.retention.bytes", _L, "-1", "Retention size per partition", dynamic=True),
    ConfigKey("log.segment.bytes", _I, "1073741824", "Segment size", at_least(14), dynamic=True),
    ConfigKey("log.roll.ms", _L, None, "Segment roll time (ms); overrides hours", dynamic=True),
    ConfigKey("log.roll.hours", _I, "168", "Segment roll time (hours)", at_least(1), dynamic=True),
    ConfigKey("log.roll.jitter.ms", _L, None, "Segment roll jitter (ms)", dynamic=True),
    ConfigKey("log.roll.jitter.hours", _I, "0", "Segment roll jitter (hours)", at_least(0), dynamic=True),
    ConfigKey("log.cleanup.policy", _LIST, "delete", "Cleanup policy", valid_list("compact", "delete"),
              dynamic=True),
    ConfigKey("compression.type", _S, "producer", "Compression of stored batches",
              valid_string("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), dynamic=True),
    ConfigKey("message.max.bytes", _I, "1048588", "Largest record batch", at_least(0), dynamic=True),
    ConfigKey("unclean.leader.election.enable", _B, "false", "Elect out-of-sync replicas as leader",
              dynamic=True),
    ConfigKey("log.cleaner.delete.retention.ms", _L, "86400000", "Tombstone retention", at_least(0),
              dynamic=True),
    ConfigKey("log.cleaner.min.compaction.lag.ms", _L, "0", "Minimum compaction lag", at_least(0), dynamic=True),
    ConfigKey("log.cleaner.max.compaction.lag.ms", _L, str(LONG_MAX), "Maximum compaction lag", at_least(1),
              dynamic=True),
    ConfigKey("log.cleaner.min.cleanable.ratio", _D, "0.5", "Dirty ratio that triggers cleaning", between(0, 1),
              dynamic=True),
    ConfigKey("log.flush.interval.messages", _L, str(LONG_MAX), "Messages between flushes", at_least(1),
              dynamic=True),
    ConfigKey("log.flush.interval.ms", _L, None, "Time between flushes", dynamic=True),
    ConfigKey("log.index.interval.bytes", _I, "4096", "Index interval", at_least(0), dynamic=True),
    ConfigKey("log.index.size.max.bytes", _I, "10485760", "Index size", at_least(4), dynamic=True),
    ConfigKey("log.segment.delete.delay.ms", _L, "60000", "Delay before deleting a segment file", at_least(0),
              dynamic=True),
    ConfigKey("log.preallocate", _B, "false", "Preallocate segment files", dynamic=True),
    ConfigKey("log.message.timestamp.type", _S, "CreateTime", "Timestamp type",
              valid_string("CreateTime", "LogAppendTime"), dynamic=True),
]

#: Broker configs whose value comes from the broker itself (snapshot), always static.
IDENTITY_BROKER_KEYS: dict[str, ConfigKey] = {
    k.name: k for k in [
        ConfigKey("broker.id", _I, None, "This broker's id"),
        ConfigKey("node.id", _I, None, "This node's id"),
        ConfigKey("broker.rack", _S, None, "This broker's rack"),
        ConfigKey("log.dirs", _S, None, "This broker's log directories"),
    ]
}

BROKER_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in _BROKER_KEYS}

#: Broker synonym groups, highest precedence first (KafkaConfig's time-unit synonyms).
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {}
for _group in (("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
               ("log.roll.ms", "log.roll.hours"),
               ("log.roll.jitter.ms", "log.roll.jitter.hours")):
    for _name in _group:
        BROKER_SYNONYMS[_name] = _group

_MS_PER = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000, "log.roll.hours": 3_600_000,
           "log.roll.jitter.hours": 3_600_000}


def _syn(*names: str) -> tuple[tuple[str, int], ...]:
    return tuple((n, _MS_PER.get(n, 1)) for n in names)


TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in [
    ConfigKey("cleanup.policy", _LIST, "delete", "delete and/or compact", valid_list("compact", "delete"),
              synonyms=_syn("log.cleanup.policy")),
    ConfigKey("compression.type", _S, "producer", "Compression of stored batches",
              valid_string("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
              synonyms=_syn("compression.type")),
    ConfigKey("delete.retention.ms", _L, "86400000", "Tombstone retention", at_least(0),
              synonyms=_syn("log.cleaner.delete.retention.ms")),
    ConfigKey("file.delete.delay.ms", _L, "60000", "Delay before deleting a file", at_least(0),
              synonyms=_syn("log.segment.delete.delay.ms")),
    ConfigKey("flush.messages", _L, str(LONG_MAX), "Messages between flushes", at_least(1),
              synonyms=_syn("log.flush.interval.messages")),
    ConfigKey("flush.ms", _L, str(LONG_MAX), "Time between flushes", at_least(0),
              synonyms=_syn("log.flush.interval.ms")),
    ConfigKey("follower.replication.throttled.replicas", _LIST, "",
              "Replicas throttled on the follower side (KIP-73): '*' or partition:broker,...",
              throttled_replicas_validator),
    ConfigKey("index.interval.bytes", _I, "4096", "Index interval", at_least(0),
              synonyms=_syn("log.index.interval.bytes")),
    ConfigKey("leader.replication.throttled.replicas", _LIST, "",
              "Replicas throttled on the leader side (KIP-73): '*' or partition:broker,...",
              throttled_replicas_validator),
    ConfigKey("local.retention.bytes", _L, "-2", "Local retention size (tiered storage)", at_least(-2)),
    ConfigKey("local.retention.ms", _L, "-2", "Local retention time (tiered storage)", at_least(-2)),
    ConfigKey("max.compaction.lag.ms", _L, str(LONG_MAX), "Maximum compaction lag", at_least(1),
              synonyms=_syn("log.cleaner.max.compaction.lag.ms")),
    ConfigKey("max.message.bytes", _I, "1048588", "Largest record batch", at_least(0),
              synonyms=_syn("message.max.bytes")),
    ConfigKey("message.timestamp.type", _S, "CreateTime", "Timestamp type",
              valid_string("CreateTime", "LogAppendTime"), synonyms=_syn("log.message.timestamp.type")),
    ConfigKey("min.cleanable.dirty.ratio", _D, "0.5", "Dirty ratio that triggers cleaning", between(0, 1),
              synonyms=_syn("log.cleaner.min.cleanable.ratio")),
    ConfigKey("min.compaction.lag.ms", _L, "0", "Minimum compaction lag", at_least(0),
              synonyms=_syn("log.cleaner.min.compaction.lag.ms")),
    ConfigKey("min.insync.replicas", _I, "1", "Minimum ISR size for acks=all produce", at_least(1),
              synonyms=_syn("min.insync.replicas")),
    ConfigKey("preallocate", _B, "false", "Preallocate segment files", synonyms=_syn("log.preallocate")),
    ConfigKey("remote.storage.enable", _B, "false", "Tiered storage"),
    ConfigKey("retention.bytes", _L, "-1", "Retention size per partition",
              synonyms=_syn("log.retention.bytes")),
    ConfigKey("retention.ms", _L, "604800000", "Retention time", at_least(-1),
              synonyms=_syn("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    ConfigKey("segment.bytes", _I, "1073741824", "Segment size", at_least(14), synonyms=_syn("log.segment.bytes")),
    ConfigKey("segment.index.bytes", _I, "10485760", "Index size", at_least(4),
              synonyms=_syn("log.index.size.max.bytes")),
    ConfigKey("segment.jitter.ms", _L, "0", "Segment roll jitter", at_least(0),
              synonyms=_syn("log.roll.jitter.ms", "log.roll.jitter.hours")),
    ConfigKey("segment.ms", _L, "604800000", "Segment roll time", at_least(1),
              synonyms=_syn("log.roll.ms", "log.roll.hours")),
    ConfigKey("unclean.leader.election.enable", _B, "false", "Elect out-of-sync replicas as leader",
              synonyms=_syn("unclean.leader.election.enable")),
]}

LIST_TYPES = (ConfigType.LIST,)


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Validate a full set of topic overrides, return them normalized.

    :param configs: config name -> raw value
    :raises ConfigValueError: naming the first bad key (unknown name or bad value)
    """
    out: dict[str, str] = {}
    for name, raw in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise ConfigValueError(f"Unknown topic config name: {name}")
        out[name] = normalize(key, raw)
    return out


class NotDynamic(ConfigValueError):
    """A broker config that cannot be updated dynamically (INVALID_REQUEST in Kafka)."""


def validate_broker_update(configs: Mapping[str, str], per_broker: bool) -> dict[str, str]:
    """Validate a dynamic broker config update, return it normalized.

    Kafka's DynamicBrokerConfig.validateConfigs rejects known read-only names and bad
    values of known ones; names it does not know are stored as they are (KafkaConfig
    ignores unknown properties, and the KRaft controller validates only the broker id).

    :param configs: config name -> raw value
    :param per_broker: True for a broker id resource, False for the cluster default ("")
    :raises NotDynamic: for a known but read-only broker config
    :raises ConfigValueError: for a bad value of a known config
    """
    out: dict[str, str] = {}
    not_dynamic = sorted(n for n in configs if (n in BROKER_CONFIGS and not BROKER_CONFIGS[n].dynamic)
                         or n in IDENTITY_BROKER_KEYS)
    if not_dynamic:
        raise NotDynamic(f"Cannot update these configs dynamically: Set({', '.join(not_dynamic)})")
    for name, raw in configs.items():
        key = BROKER_CONFIGS.get(name)
        out[name] = normalize(key, raw) if key is not None else raw
    return out


# ---------------------------------------------------------------- resolution

@dataclass
class BrokerConfigState:
    """Every broker-level config layer of the cluster.

    :param static: broker id -> server.properties-style configs (source STATIC_BROKER_CONFIG)
    :param dynamic: resource name ("" = cluster default, "3" = broker 3) -> dynamic configs
    """

    static: dict[int, dict[str, str]] = field(default_factory=dict)
    dynamic: dict[str, dict[str, str]] = field(default_factory=lambda: {"": {}})

    def _layers(self, broker_id: int | None) -> list[tuple[Mapping[str, str], int]]:
        """Config maps in Kafka's precedence order with their source ids."""
        layers: list[tuple[Mapping[str, str], int]] = []
        if broker_id is not None:
            layers.append((self.dynamic.get(str(broker_id), {}), ConfigSource.DYNAMIC_BROKER_CONFIG))
        layers.append((self.dynamic.get("", {}), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if broker_id is not None:
            layers.append((self.static.get(broker_id, {}), ConfigSource.STATIC_BROKER_CONFIG))
        elif self.static:
            # Cluster-level view: static configs are normally identical on every broker.
            layers.append((self.static[min(self.static)], ConfigSource.STATIC_BROKER_CONFIG))
        layers.append((_STATIC_DEFAULTS, ConfigSource.DEFAULT_CONFIG))
        return layers

    def value(self, broker_id: int | None, name: str) -> str | None:
        """Effective value of one broker config (no synonym conversion).

        :param broker_id: the broker, None for the cluster-wide view
        :param name: the broker config name
        """
        for layer, _src in self._layers(broker_id):
            if name in layer:
                return layer[name]
        return None

    def synonyms(self, broker_id: int | None, name: str, group: Iterable[str] | None = None) -> list[ConfigSynonym]:
        """Kafka's ``configSynonyms``: every layer x synonym, then dropWhile(name != key)."""
        names = tuple(group) if group is not None else BROKER_SYNONYMS.get(name, (name,))
        found: list[ConfigSynonym] = []
        for layer, src in self._layers(broker_id):
            for syn in names:
                if syn in layer:
                    found.append(ConfigSynonym(syn, layer[syn], int(src)))
        while found and found[0].name != name:
            found.pop(0)
        return found

    def long_value(self, broker_id: int | None, name: str) -> int:
        """Effective value of a LONG/INT broker config as an int.

        :param broker_id: the broker, None for the cluster-wide view
        :param name: the config name
        """
        raw = self.value(broker_id, name)
        return int(raw) if raw is not None else 0

    def topic_fallback(self, broker_id: int | None, key: ConfigKey) -> str | None:
        """Value a topic config takes when the topic does not override it.

        :param broker_id: broker answering (its per-broker dynamic configs apply), or None
        :param key: the topic config definition
        """
        for layer, _src in self._layers(broker_id):
            for syn, factor in key.synonyms:
                if syn in layer and layer[syn] is not None:
                    raw = layer[syn]
                    if factor != 1:
                        return str(int(raw) * factor)
                    return raw
        return key.default

    def describe_broker(self, broker_id: int, identity: Mapping[str, str], keys: Iterable[str] | None,
                        include_synonyms: bool = True) -> list[ConfigEntry]:
        """DescribeConfigs for one broker id: every broker config with value and source.

        :param broker_id: the broker
        :param identity: broker.id, broker.rack, log.dirs... of that broker (static)
        :param keys: names to describe, None for all
        :param include_synonyms: fill ``synonyms``
        """
        wanted = set(keys) if keys is not None else None
        out: list[ConfigEntry] = []
        for name, ident in sorted(IDENTITY_BROKER_KEYS.items()):
            if (wanted is None or name in wanted) and name in identity:
                syn = [ConfigSynonym(name, identity[name], int(ConfigSource.STATIC_BROKER_CONFIG))]
                out.append(ConfigEntry(name, identity[name], True, int(ConfigSource.STATIC_BROKER_CONFIG), False,
                                       syn if include_synonyms else [], int(ident.type), ident.doc))
        for name, key in sorted(BROKER_CONFIGS.items()):
            if wanted is not None and name not in wanted:
                continue
            syns = self.synonyms(broker_id, name)
            if name in DYNAMIC_ONLY_BROKER_KEYS:
                syns = [x for x in syns if x.source != ConfigSource.DEFAULT_CONFIG]
                if not syns:
                    continue
            value = syns[0].value if syns else key.default
            source = syns[0].source if syns else int(ConfigSource.DEFAULT_CONFIG)
            out.append(ConfigEntry(name, value, not key.dynamic, source, key.sensitive,
                                   syns if include_synonyms else [], int(key.type), key.doc))
        out.extend(self._describe_unknown(broker_id, wanted, include_synonyms))
        return out

    def _describe_unknown(self, broker_id: int, wanted: set[str] | None,
                          include_synonyms: bool) -> list[ConfigEntry]:
        """Dynamic configs set under names Kafka does not define: listed as set, read-only."""
        out: list[ConfigEntry] = []
        seen: set[str] = set()
        for layer, src in ((self.dynamic.get(str(broker_id), {}), ConfigSource.DYNAMIC_BROKER_CONFIG),
                           (self.dynamic.get("", {}), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
            for name, value in sorted(layer.items()):
                if name in BROKER_CONFIGS or name in seen or (wanted is not None and name not in wanted):
                    continue
                seen.add(name)
                syn = [ConfigSynonym(name, value, int(src))] if include_synonyms else []
                out.append(ConfigEntry(name, value, True, int(src), False, syn, int(ConfigType.UNKNOWN), None))
        return sorted(out, key=lambda e: e.name)

    def describe_default(self, keys: Iterable[str] | None, include_synonyms: bool = True) -> list[ConfigEntry]:
        """DescribeConfigs for the cluster default resource (name ""): only what is set there.

        :param keys: names to describe, None for all
        :param include_synonyms: fill ``synonyms``
        """
        wanted = set(keys) if keys is not None else None
        out = []
        src = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        for name, value in sorted(self.dynamic.get("", {}).items()):
            if wanted is not None and name not in wanted:
                continue
            key = BROKER_CONFIGS.get(name)
            syn = [ConfigSynonym(name, value, src)] if include_synonyms else []
            if key is None:  # an unknown name, stored as given
                out.append(ConfigEntry(name, value, True, src, False, syn, int(ConfigType.UNKNOWN), None))
            else:
                out.append(ConfigEntry(name, value, False, src, key.sensitive, syn, int(key.type), key.doc))
        return out

    def describe_topic(self, overrides: Mapping[str, str], keys: Iterable[str] | None,
                       include_synonyms: bool = True, broker_id: int | None = None) -> list[ConfigEntry]:
        """DescribeConfigs for a topic: every topic config, overrides marked DYNAMIC_TOPIC_CONFIG.

        :param overrides: the topic's dynamic configs
        :param keys: names to describe, None for all
        :param include_synonyms: fill ``synonyms``
        :param broker_id: the broker answering, whose per-broker dynamic configs apply
        """
        wanted = set(keys) if keys is not None else None
        out = []
        for name, key in sorted(TOPIC_CONFIGS.items()):
            if wanted is not None and name not in wanted:
                continue
            syns: list[ConfigSynonym] = []
            if key.synonyms:
                primary = key.synonyms[0][0]
                syns = self.synonyms(broker_id, primary, BROKER_SYNONYMS.get(primary, (primary,)))
            if name in overrides:
                value: str | None = overrides[name]
                syns.insert(0, ConfigSynonym(name, value, int(ConfigSource.DYNAMIC_TOPIC_CONFIG)))
            else:
                value = self.topic_fallback(broker_id, key)
            source = syns[0].source if syns else int(ConfigSource.DEFAULT_CONFIG)
            out.append(ConfigEntry(name, value, False, source, key.sensitive,
                                   syns if include_synonyms else [], int(key.type), key.doc))
        return out


#: Broker configs that exist only as dynamic configs (DynamicConfig.Broker's quota configs,
#: not KafkaConfig definitions): DescribeConfigs lists them only where they are set.
DYNAMIC_ONLY_BROKER_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                      "replica.alter.log.dirs.io.max.bytes.per.second"})

#: Kafka's "staticDefaultConfigs": defaults that are not null.
_STATIC_DEFAULTS: dict[str, str] = {k.name: k.default for k in _BROKER_KEYS if k.default is not None}


def apply_incremental(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]],
                      keys: Mapping[str, ConfigKey], default_of: Callable[[ConfigKey], str | None]) -> dict[str, str]:
    """Apply IncrementalAlterConfigs ops (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT) to a copy.

    Values are not validated here (the caller validates the result).

    :param current: the resource's dynamic configs
    :param ops: (name, op, value)
    :param keys: the config definitions of this resource type
    :param default_of: value used as the base of APPEND/SUBTRACT when the key is unset
    :raises ConfigValueError: APPEND/SUBTRACT on a non-list config, or an unknown op
    """
    result = dict(current)
    for name, op, value in ops:
        if op == 0:
            result[name] = value if value is not None else ""
        elif op == 1:
            result.pop(name, None)
        elif op in (2, 3):
            key = keys.get(name)
            if key is None:  # ConfigAdminManager.prepareIncrementalConfigs: only known LIST configs
                raise ConfigValueError(f"Unknown config name: {name}")
            if key.type != ConfigType.LIST:
                verb = "append" if op == 2 else "subtract"
                raise ConfigValueError(f"Config value {verb} is not allowed for config key: {name}")
            base_raw = result.get(name)
            if base_raw is None:
                base_raw = default_of(key) or ""
            base = [i for i in split_list(base_raw) if i]
            items = [i for i in split_list(value or "") if i]
            if op == 2:
                merged = base + [i for i in items if i not in base]
            else:
                merged = [i for i in base if i not in items]
            result[name] = ",".join(merged)
        else:
            raise ConfigValueError(f"Unknown config operation {op} for {name}")
    return result
