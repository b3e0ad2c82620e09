"""A stand-in admin for cordon tests: broker configs in memory with Kafka's sources (tests/unit, tests/dags)."""
from __future__ import annotations

from typing import Iterable

from kafka_reassign.cluster.config_source import ConfigChangeLike, ConfigsRead, Inherited
from kafka_reassign.cluster.cordons import CORDONED_LOG_DIRS, DESCRIBE_LOG_DIRS_API
from kafka_reassign.cluster.state import ClusterState


class ConfigAdmin:
    """Broker configs in memory, with Kafka's sources; counts writes (validate_only ones apart)."""

    def __init__(self, own: dict[int, str | None], inherited: dict[int, Inherited] | None = None,
                 describe_log_dirs_version: int = 5, state: ClusterState | None = None) -> None:
        self.own = dict(own)
        self.state = state
        self.inherited = inherited or {}
        self.version = describe_log_dirs_version
        self.writes: list[tuple[str, str, str | None]] = []
        self.validated = 0

    def max_api_version(self, api_key: int) -> int | None:
        return self.version if api_key == DESCRIBE_LOG_DIRS_API else 0

    def describe_sourced(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> ConfigsRead:
        ids = list(broker_ids)
        return ConfigsRead({("broker", str(b)): {CORDONED_LOG_DIRS: self.own.get(b)} for b in ids}, {},
                           {("broker", str(b)): {CORDONED_LOG_DIRS: self.inherited[b]} for b in ids
                            if b in self.inherited})

    def read_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                     keys: Iterable[str] | None = None) -> ConfigsRead:
        return self.describe_sourced(broker_ids, topics, keys)

    def alter_configs(self, changes: Iterable[ConfigChangeLike], validate_only: bool = False) -> None:
        if validate_only:
            self.validated += 1
            return
        for c in changes:
            assert c.key == CORDONED_LOG_DIRS
            self.own[int(c.name)] = c.value
            self.writes.append((c.name, c.key, c.value))

    def cluster_state(self, include_log_dirs: bool = True, topics: list[str] | None = None) -> ClusterState:
        assert self.state is not None, "give the ConfigAdmin a state"
        return self.state

