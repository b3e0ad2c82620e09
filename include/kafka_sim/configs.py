"""The topic and broker configs the simulated cluster knows: a declarative table.

Types, parsing and validators are :mod:`kafka_sim.config_types`; validation of updates
and DescribeConfigs resolution are :mod:`kafka_sim.config_resolution`.
"""
from __future__ import annotations

from kafka_sim.config_types import (
    LONG_MAX, ConfigKey, ConfigType, at_least, between, throttled_replicas_validator, valid_list, valid_string,
)


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
    # KIP-1066 (Kafka 4.3): log dirs taking no new replicas; per broker only (PER_BROKER_CONFIGS).
    ConfigKey("cordoned.log.dirs", _LIST, "",
              "Log dirs of this broker that take no new replicas: a list of log.dirs entries or '*'", dynamic=True),
    # Replication settings that are static in Kafka.
    ConfigKey("replica.lag.time.max.ms", _L, "30000",
              "A follower not caught up for this long is removed from the ISR", at_least(0)),
    ConfigKey("replica.fetch.max.bytes", _I, "1048576", "Bytes fetched per partition per request", at_least(0)),
    ConfigKey("replica.fetch.backoff.ms", _I, "1000", "Wait of a fetcher thread with nothing to fetch",
              at_least(0)),
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

#: Broker configs that exist only as dynamic configs (DynamicConfig.Broker's quota configs,
#: not KafkaConfig definitions): DescribeConfigs lists them only where they are set.
DYNAMIC_ONLY_BROKER_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                      "replica.alter.log.dirs.io.max.bytes.per.second"})

#: Dynamic broker configs that only a broker id resource takes, not the cluster default
#: (DynamicBrokerConfig.PER_BROKER_CONFIGS).
PER_BROKER_ONLY_KEYS = frozenset({"cordoned.log.dirs"})

#: Kafka's "staticDefaultConfigs": defaults that are not null.
STATIC_BROKER_DEFAULTS: dict[str, str] = {k.name: k.default for k in _BROKER_KEYS if k.default is not None}
