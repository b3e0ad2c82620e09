"""Kafka config types: definitions (ConfigKey), sources, parsing and validators.

Follows Apache Kafka's ``ConfigDef``: types are parsed and range-checked the same way
(messages read ``Invalid value X for configuration K: reason``) and values are stored in
the string form Kafka would describe them in (lists joined by ``,``, numbers canonical).
The tables of the configs themselves are :mod:`kafka_sim.configs`.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Callable

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
    if key.validator is throttled_replicas_validator and raw is not None and _REPLICA_LIST.fullmatch(raw):
        # Valid and described as it is (every item a pair, nothing to strip): one match instead of
        # a split, a match per item and a join, for lists written at every refill of a large move.
        return raw
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
#: a whole list of pairs without spaces or empty items: how tools write them, valid as it is
_REPLICA_LIST = re.compile(r"[0-9]+:[0-9]+(?:,[0-9]+:[0-9]+)*")


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


@functools.lru_cache(maxsize=1024)
def parse_throttled_replicas(value: str | None) -> bool | frozenset[tuple[int, int]] | None:
    """Turn a throttled-replicas value into True (``*``), a set of (partition, broker), or None.

    Cached (the answer is immutable): a write of one of a topic's two lists parses the other,
    unchanged, again.

    :param value: the (already validated) config value, None when unset
    """
    if value is None:
        return None
    if _REPLICA_LIST.fullmatch(value):  # pairs only: the numbers in order, without a split per item
        numbers = map(int, value.replace(":", ",").split(","))
        return frozenset(zip(numbers, numbers))
    items = [i for i in split_list(value) if i]
    if items == ["*"]:
        return True
    pairs = frozenset((int(a), int(b)) for a, b in (i.split(":") for i in items))
    return pairs or None
