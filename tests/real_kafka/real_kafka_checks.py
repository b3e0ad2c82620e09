"""Read-backs of a real cluster through clients independent of the tool (confluent-kafka, kcat).

What a test asserts about "nothing left behind" is read here, never through the tool's own
admin layer, so a bug there cannot hide itself.
"""
from __future__ import annotations

import json
import subprocess
from typing import Iterable

#: Every config the tool may write during a run.
THROTTLE_BROKER_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                        "replica.alter.log.dirs.io.max.bytes.per.second")
THROTTLE_TOPIC_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
#: Sources a config has when somebody set it (not the static file, not Kafka's default).
_SET_SOURCES = {"DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_TOPIC_CONFIG"}


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def describe(bootstrap: str, resource_type: str, name: str) -> dict[str, tuple[str | None, str]]:
    """Every config of one resource with its source: key -> (value, source name)."""
    return describe_all(bootstrap, [(resource_type, name)])[(resource_type, name)]


def describe_all(bootstrap: str, targets: Iterable[tuple[str, str]]
                 ) -> dict[tuple[str, str], dict[str, tuple[str | None, str]]]:
    """Every config of each (type, name) with its source, asked all at once of one client: a probe
    polled while a move runs reads its resources at nearly one moment, and quickly. (One request
    per resource: librdkafka takes at most one broker resource in a DescribeConfigs.)"""
    from confluent_kafka.admin import ConfigResource, ResourceType
    admin = _admin(bootstrap)  # kept referenced until the results are in (librdkafka drops it otherwise)
    pending = {}
    for t, n in targets:
        res = ConfigResource(ResourceType.BROKER if t == "broker" else ResourceType.TOPIC, n)
        pending[(t, n)] = admin.describe_configs([res])[res]
    out = {}
    for target, future in pending.items():
        entries = future.result(timeout=30)
        out[target] = {k: (e.value, e.source_name if hasattr(e, "source_name") else _source_name(e.source))
                       for k, e in entries.items()}
    return out


def _source_name(source: object) -> str:
    from confluent_kafka.admin import ConfigSource
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def throttle_configs(bootstrap: str, brokers: Iterable[int],
                     topics: Iterable[str] = ()) -> dict[str, dict[str, tuple[str | None, str]]]:
    """Throttle configs somebody set: ``broker 1`` / ``topic t`` -> key -> (value, source).

    A cluster-wide default shows on every broker with the source DYNAMIC_DEFAULT_BROKER_CONFIG.
    """
    found: dict[str, dict[str, tuple[str | None, str]]] = {}
    targets = [("broker", str(b)) for b in brokers] + [("topic", t) for t in topics]
    for (rtype, name), configs in describe_all(bootstrap, targets).items():
        keys = THROTTLE_BROKER_KEYS if rtype == "broker" else THROTTLE_TOPIC_KEYS
        picked = {k: configs[k] for k in keys if k in configs and configs[k][1] in _SET_SOURCES}
        if picked:
            found[f"{rtype} {name}"] = picked
    return found


def placement(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """Partition -> replicas as kcat's metadata listing shows them (a third, independent client)."""
    out = subprocess.run(["kcat", "-b", bootstrap, "-L", "-J", "-t", topic], capture_output=True,
                         text=True, timeout=60, check=True)
    data = json.loads(out.stdout)
    (meta,) = [t for t in data["topics"] if t["topic"] == topic]
    return {p["partition"]: [r["id"] for r in p["replicas"]] for p in meta["partitions"]}


def topics(bootstrap: str) -> list[str]:
    """Every topic of the cluster, internal ones left out."""
    admin = _admin(bootstrap)
    md = admin.list_topics(timeout=30)
    return sorted(t for t in md.topics if not t.startswith("__"))
