"""Config reads and writes of :class:`~kafka_reassign.cluster.admin.KafkaAdmin` (DescribeConfigs,
IncrementalAlterConfigs), each value sorted by the source Kafka reports for it.
"""
from __future__ import annotations

from typing import Iterable

from kafka_reassign.cluster.calls import AdminConnection, log
from kafka_reassign.cluster.config_source import INHERITED_SOURCES, ConfigChangeLike, ConfigsRead, Inherited
from kafka_reassign.errors import KafkaAdminError


class ConfigAccess(AdminConnection):
    """Per-broker and per-topic configs: min ISR for the cluster state, throttle values."""

    def _topic_min_isr(self, topics: list[str]) -> dict[str, dict[str, str]]:
        """{topic: {"min.insync.replicas": value}} of the topics that report one (any source)."""
        if not topics:
            return {}
        from kafka.admin import ConfigResource, ConfigResourceType
        res = [ConfigResource(ConfigResourceType.TOPIC, t, ["min.insync.replicas"]) for t in topics]
        raw = self._call("DescribeConfigs", "describe_configs", res, config_filter="all")
        out: dict[str, dict[str, str]] = {}
        for name, entries in (raw.get("topic") or {}).items():
            v = (entries.get("min.insync.replicas") or {}).get("value")
            if v is not None:
                out[name] = {"min.insync.replicas": str(v)}
        return out

    def _broker_default_min_isr(self, broker_id: int | None) -> int:
        """The broker's min.insync.replicas (what a topic without its own gets); 1 when unreadable."""
        if broker_id is None:
            return 1
        from kafka.admin import ConfigResource, ConfigResourceType
        try:
            raw = self._call("DescribeConfigs", "describe_configs",
                             [ConfigResource(ConfigResourceType.BROKER, str(broker_id), ["min.insync.replicas"])],
                             config_filter="all")
            v = ((raw.get("broker") or {}).get(str(broker_id)) or {}).get("min.insync.replicas", {}).get("value")
            return max(1, int(v)) if v is not None else 1
        except (KafkaAdminError, ValueError, TypeError):
            return 1

    def describe_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> dict[tuple[str, str], dict[str, str | None]]:
        """Dynamic config values (per-broker and per-topic overrides only, not defaults).

        :param broker_ids: brokers to read
        :param topics: topics to read
        :param keys: only these keys (each present in the result, None = not set); all when None
        :returns: {("broker", "1"): {key: value | None}, ("topic", "t"): {...}}
        """
        return self.describe_sourced(broker_ids, topics, keys).values

    def describe_sourced(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> ConfigsRead:
        """Per-resource dynamic values, and what each broker inherits where it has none.

        One DescribeConfigs without kafka-python's "modified" filter (which drops the
        cluster-wide default): each value is sorted by the source Kafka reports for it. A
        broker's own value (DYNAMIC_BROKER_CONFIG) goes to ``values``; one it inherits from the
        cluster default or its server.properties goes to ``inherited``.

        :returns: a ConfigsRead with nothing unreachable (a failure raises KafkaAdminError)
        """
        from kafka.admin import ConfigResource, ConfigResourceType, ConfigSourceType
        key_list = list(keys) if keys is not None else None
        res = [ConfigResource(ConfigResourceType.BROKER, str(b), key_list) for b in broker_ids]
        res += [ConfigResource(ConfigResourceType.TOPIC, t, key_list) for t in topics]
        out = ConfigsRead({}, {})
        for r in res:
            rtype = "broker" if r.resource_type == ConfigResourceType.BROKER else "topic"
            out.values[(rtype, r.name)] = {k: None for k in (key_list or [])}
        if not res:
            return out
        raw = self._call("DescribeConfigs", "describe_configs", res, config_filter="all")
        for rtype in ("broker", "topic"):
            for name, entries in (raw.get(rtype) or {}).items():
                d = out.values.setdefault((rtype, name), {})
                for k, entry in entries.items():
                    if key_list is not None and k not in key_list:
                        continue
                    source = str(entry.get("config_source", ""))
                    value = entry.get("value")
                    if rtype == "broker" and source in INHERITED_SOURCES and value is not None:
                        out.inherited.setdefault((rtype, name), {})[k] = Inherited(str(value), source)
                    elif source in ConfigSourceType.__members__ and ConfigSourceType[source].is_modified():
                        d[k] = value  # what the "modified" filter kept: the resource's own value
        return out

    def read_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                     keys: Iterable[str] | None = None) -> ConfigsRead:
        """Like :meth:`describe_configs`, but a resource that cannot be read does not hide the others.

        One call for everything first; when it fails, topics are read together and each
        broker alone (a broker's configs can only be read from that broker), and whatever
        still fails is listed in ``unreachable`` with the error.
        """
        broker_ids, topics = list(broker_ids), list(topics)
        key_list = list(keys) if keys is not None else None
        try:
            return self.describe_sourced(broker_ids, topics, key_list)
        except KafkaAdminError as exc:
            log.warning("DescribeConfigs of %d broker(s) and %d topic(s) failed (%s): reading them one by one",
                        len(broker_ids), len(topics), exc)
        out = ConfigsRead({}, {})
        groups: list[tuple[list[int], list[str]]] = [([], topics)] if topics else []
        groups += [([b], []) for b in broker_ids]
        for i, (brokers, names) in enumerate(groups):
            try:
                part = self.describe_sourced(brokers, names, key_list)
                out.values.update(part.values)
                out.inherited.update(part.inherited)
            except KafkaAdminError as exc:
                failed = [("broker", str(b)) for b in brokers] + [("topic", t) for t in names]
                if names:
                    # Topic configs may be read from any broker: none answered, Kafka is unreachable.
                    failed += [("broker", str(b)) for g in groups[i + 1:] for b in g[0]]
                for res in failed:
                    out.unreachable[res] = str(exc)
                if names:
                    break
        return out
    def alter_configs(self, changes: Iterable[ConfigChangeLike], validate_only: bool = False) -> None:
        """Apply ConfigChanges with IncrementalAlterConfigs (SET, or DELETE when value is None).

        :param changes: :class:`~kafka_reassign.throttle.ConfigChange` objects
        :raises KafkaAdminError: naming every resource that failed
        """
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
        grouped: dict[tuple[str, str], dict[str, tuple[object, str | None]]] = {}
        for c in changes:
            op = AlterConfigOp.DELETE if c.value is None else AlterConfigOp.SET
            grouped.setdefault((c.resource_type, c.name), {})[c.key] = (op, c.value)
        if not grouped:
            return
        res = [ConfigResource(ConfigResourceType.BROKER if rtype == "broker" else ConfigResourceType.TOPIC,
                              name, cfg) for (rtype, name), cfg in grouped.items()]
        raw = self._call("IncrementalAlterConfigs", "alter_configs", res, validate_only=validate_only,
                         raise_on_unknown=False, incremental=True)
        failed = [f"{rtype} {name}: {result}" for rtype, by_name in (raw or {}).items()
                  for name, result in by_name.items() if result != "OK"]
        if failed:
            first = failed[0]
            name = first.split("] ", 1)[1].split(":", 1)[0] if "] " in first else "ALTER_CONFIGS_FAILED"
            raise KafkaAdminError("IncrementalAlterConfigs", name, "; ".join(failed))
