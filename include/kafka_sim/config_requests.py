"""Config requests: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on the model.
"""
from __future__ import annotations

from typing import Callable, Mapping

from kafka_sim import errors as E
from kafka_sim.config_resolution import (
    BrokerConfigState, NotDynamic, apply_incremental, validate_broker_update, validate_topic_configs,
)
from kafka_sim.config_types import ConfigEntry, ConfigValueError
from kafka_sim.configs import BROKER_CONFIGS, TOPIC_CONFIGS
from kafka_sim.cordons import CORDONED_LOG_DIRS
from kafka_sim.model_base import locked
from kafka_sim.state import Topic

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4



class ConfigRequests:
    """Mixin of ClusterModel: describe and alter topic and broker configs."""

    #: Seconds a broker takes to show a committed config write in DescribeConfigs. A KRaft broker
    #: answers from its own copy of the metadata log, which catches up with the controller a
    #: moment later (seen on Kafka 4.3.1: up to 0.3 s, more under load). 0: at once.
    config_read_lag: float = 0.0


    def _min_isr(self, topic: Topic) -> int:
        raw = topic.configs.get("min.insync.replicas")
        if raw is None:
            raw = self.configs.topic_fallback(None, TOPIC_CONFIGS["min.insync.replicas"])
        return int(raw or 1)

    def _unclean_election_enabled(self, topic: str) -> bool:
        """unclean.leader.election.enable of a topic (topic config, else broker default)."""
        t = self.topics.get(topic)
        raw = t.configs.get("unclean.leader.election.enable") if t is not None else None
        if raw is None:
            raw = self.configs.topic_fallback(None, TOPIC_CONFIGS["unclean.leader.election.enable"])
        return str(raw).lower() == "true"

    @locked
    def min_insync_replicas(self, topic: str) -> int:
        """Effective min.insync.replicas of a topic (topic config, else broker default).

        :param topic: topic name
        """
        t = self.topics.get(topic)
        return 1 if t is None else self._min_isr(t)


    @locked
    def broker_configs(self, broker_id: int | str) -> dict[str, str]:
        """Dynamic configs set on a broker ("" = cluster default).

        :param broker_id: broker id or ""
        """
        return dict(self.configs.dynamic.get(str(broker_id), {}))

    @locked
    def topic_configs(self, topic: str) -> dict[str, str]:
        """Dynamic configs set on a topic.

        :param topic: topic name
        """
        return dict(self.topics[topic].configs)

    @locked
    def describe_configs(self, resource_type: int, name: str, keys: list[str] | None,
                         include_synonyms: bool = True) -> tuple[int, str | None, list[ConfigEntry]]:
        """DescribeConfigs for one resource.

        :param resource_type: 2 topic, 4 broker
        :param name: topic name, broker id, or "" for the cluster default
        :param keys: config names to describe, None for all
        :param include_synonyms: fill the synonyms of each entry
        """
        if not keys:
            keys = None  # null and empty both mean every config (Kafka's ConfigHelper)
        if resource_type == RESOURCE_TOPIC:
            topic = self.topics.get(name)
            if topic is None:
                return E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.", []
            return E.NONE, None, self.configs.describe_topic(self._as_shown("topic", name, topic.configs), keys,
                                                             include_synonyms)
        if resource_type == RESOURCE_BROKER:
            shown = self._shown_broker_configs(name)
            if name == "":
                return E.NONE, None, shown.describe_default(keys, include_synonyms)
            try:
                bid = int(name)
            except ValueError:
                return E.INVALID_REQUEST, f"Unable to parse broker name {name!r} as a base 10 number.", []
            broker = self.brokers.get(bid)
            if broker is None:
                return E.INVALID_REQUEST, f"Broker {bid} does not exist.", []
            identity = {"broker.id": str(bid), "node.id": str(bid), "log.dirs": ",".join(broker.dir_paths())}
            if broker.rack is not None:
                identity["broker.rack"] = str(broker.rack)
            return E.NONE, None, shown.describe_broker(bid, identity, keys, include_synonyms)
        return E.INVALID_REQUEST, f"Unsupported resource type {resource_type}", []


    def _as_shown(self, kind: str, name: str, current: Mapping[str, str]) -> Mapping[str, str]:
        """``current`` as a broker still shows it: writes of the last :attr:`config_read_lag` s undone."""
        if not self.config_read_lag:
            return current
        cutoff = self.now() - self.config_read_lag
        shown = current
        for at, k, n, before in reversed(getattr(self, "_config_history", [])):
            if at > cutoff and (k, n) == (kind, name):
                shown = before  # the earliest write after the cutoff wins: its "before" is what shows
        return shown

    def _shown_broker_configs(self, name: str) -> BrokerConfigState:
        if not self.config_read_lag:
            return self.configs
        dynamic = dict(self.configs.dynamic)
        for res in {name, ""}:
            dynamic[res] = dict(self._as_shown("broker", res, self.configs.dynamic.get(res, {})))
        return BrokerConfigState(static=self.configs.static, dynamic=dynamic)

    def _remember_config(self, kind: str, name: str, before: Mapping[str, str]) -> None:
        """Keep the value before a write while a broker may still show it (only with a lag)."""
        if not self.config_read_lag:
            return
        history = self.__dict__.setdefault("_config_history", [])
        cutoff = self.now() - self.config_read_lag
        history[:] = [h for h in history if h[0] > cutoff]
        history.append((self.now(), kind, name, dict(before)))

    # ------------------------------------------------------------ configs (write)
    @locked
    def incremental_alter_configs(self, resource_type: int, name: str, ops: list[tuple[str, int, str | None]],
                                  validate_only: bool = False) -> tuple[int, str | None]:
        """IncrementalAlterConfigs on one resource (op 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT).

        :param resource_type: 2 topic, 4 broker
        :param name: topic name, broker id, or "" for the cluster default
        :param ops: (key, op, value)
        :param validate_only: check only, change nothing
        """
        keys = [k for k, _op, _v in ops]
        if len(set(keys)) != len(keys):
            dup = sorted({k for k in keys if keys.count(k) > 1})
            return E.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(dup)}"
        return self._alter_configs(resource_type, name, validate_only, "IncrementalAlterConfigs",
                                   lambda current, defs, default_of: apply_incremental(current, ops, defs, default_of))

    @locked
    def alter_configs(self, resource_type: int, name: str, configs: dict[str, str | None],
                      validate_only: bool = False) -> tuple[int, str | None]:
        """Legacy AlterConfigs: replace every dynamic config of the resource.

        :param resource_type: 2 topic, 4 broker
        :param name: topic name, broker id, or "" for the cluster default
        :param configs: the complete new set (None values are dropped)
        :param validate_only: check only, change nothing
        """
        return self._alter_configs(resource_type, name, validate_only, "AlterConfigs",
                                   lambda _c, _d, _f: {k: v for k, v in configs.items() if v is not None})

    def _alter_configs(self, resource_type: int, name: str, validate_only: bool, api: str,
                       compute: Callable[..., dict[str, str]]) -> tuple[int, str | None]:
        self._run(self.now())
        if resource_type == RESOURCE_TOPIC:
            topic = self.topics.get(name)
            if topic is None:
                return E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
            try:
                new = compute(topic.configs, TOPIC_CONFIGS, lambda k: self.configs.topic_fallback(None, k))
                new = validate_topic_configs(new)
            except ConfigValueError as exc:
                return E.INVALID_CONFIG, str(exc)
            if validate_only:
                return E.NONE, None
            self._remember_config("topic", name, topic.configs)
            topic.configs = new
            old_throttles = (topic.leader_throttled, topic.follower_throttled)
            topic.refresh_throttles()
            self._throttles_changed(topic, *old_throttles)  # which traffic is recorded in and held back by the quotas
            self._flush_dirty()
            self.writes[api] += 1
            self.state_version += 1
            return E.NONE, None
        if resource_type == RESOURCE_BROKER:
            if name != "":
                try:
                    int(name)
                except ValueError:
                    return E.INVALID_REQUEST, f"Unable to parse broker name {name!r} as a base 10 number."
            current = self.configs.dynamic.get(name, {})
            bid = int(name) if name else None
            try:
                new = compute(current, BROKER_CONFIGS, lambda k: self.configs.value(bid, k.name))
                new = validate_broker_update(new, per_broker=bool(name))
                if not self.cordons_enabled and new.get(CORDONED_LOG_DIRS) != current.get(CORDONED_LOG_DIRS):
                    # ConfigurationControlManager below metadata.version 4.3-IV0 (testFeatureNotEnabled)
                    return E.INVALID_CONFIG, (f"{CORDONED_LOG_DIRS} needs metadata.version 4.3-IV0 or later "
                                              "(KIP-1066)")
            except NotDynamic as exc:
                return E.INVALID_REQUEST, str(exc)
            except ConfigValueError as exc:
                if exc.args and str(exc.args[0]).startswith("Unknown config name"):
                    return E.INVALID_CONFIG, str(exc)  # prepareIncrementalConfigs (APPEND/SUBTRACT)
                # ConfigAdminManager.validateBrokerConfigChange: a bad value becomes
                # InvalidRequestException (KAFKA-13609), unlike topic configs (INVALID_CONFIG)
                return E.INVALID_REQUEST, str(exc)
            if validate_only:
                return E.NONE, None
            self._run(self.now())  # bytes so far moved at the old rates
            self._remember_config("broker", name, current)
            if new:
                self.configs.dynamic[name] = new
            else:
                self.configs.dynamic.pop(name, None)
                self.configs.dynamic.setdefault("", {})
            self._refresh_rates(bid if bid in self.brokers else None)
            self.writes[api] += 1
            self.state_version += 1
            return E.NONE, None
        return E.INVALID_REQUEST, f"Unsupported resource type {resource_type}"

