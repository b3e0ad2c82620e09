"""Config updates validated and DescribeConfigs resolved, the way Kafka does.

``describe_*`` mark sources and synonyms the way ``ConfigHelper`` does (topic override
first, then per-broker dynamic, cluster-wide dynamic default, static, and static default;
``dropWhile(name != key)`` on the broker-synonym list).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from kafka_sim.config_types import (
    ConfigEntry, ConfigKey, ConfigSource, ConfigSynonym, ConfigType, ConfigValueError, normalize, split_list,
)
from kafka_sim.configs import (
    BROKER_CONFIGS, BROKER_SYNONYMS, DYNAMIC_ONLY_BROKER_KEYS, IDENTITY_BROKER_KEYS, PER_BROKER_ONLY_KEYS,
    STATIC_BROKER_DEFAULTS, TOPIC_CONFIGS,
)


#: (name, value) -> the value normalized, for the scalar topic configs validated before: a write
#: of one config validates every override of the topic again (Kafka checks the whole set), and
#: the others are mostly unchanged (a replica list at each refill, beside a retention.ms). Lists
#: are left out: their values change with every write.
_NORMALIZED: dict[tuple[str, str], str] = {}
#: values kept before they are all forgotten
_NORMALIZED_MAX = 4096


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
        if key.type == ConfigType.LIST or raw is None:
            out[name] = normalize(key, raw)
            continue
        done = _NORMALIZED.get((name, raw))
        if done is None:  # a bad value raises every time: only valid ones are kept
            done = normalize(key, raw)
            if len(_NORMALIZED) >= _NORMALIZED_MAX:
                _NORMALIZED.clear()
            _NORMALIZED[(name, raw)] = done
        out[name] = done
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
    broker_only = sorted(n for n in configs if n in PER_BROKER_ONLY_KEYS)
    if broker_only and not per_broker:
        raise NotDynamic("Cannot update these configs at default cluster level, broker id must be specified: "
                         f"Set({', '.join(broker_only)})")
    for name, raw in configs.items():
        key = BROKER_CONFIGS.get(name)
        out[name] = normalize(key, raw) if key is not None else raw
    return out


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
        layers.append((STATIC_BROKER_DEFAULTS, ConfigSource.DEFAULT_CONFIG))
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
        # only the names asked for, in the same (sorted) order: the executor asks for two at each refill
        names = sorted(TOPIC_CONFIGS) if keys is None else sorted(n for n in set(keys) if n in TOPIC_CONFIGS)
        out = []
        for name in names:
            key = TOPIC_CONFIGS[name]
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
