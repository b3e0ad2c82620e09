"""Topic and partition creation and deletion.
"""
from __future__ import annotations

import re
import uuid

from kafka_sim import errors as E
from kafka_sim.config_resolution import validate_topic_configs
from kafka_sim.config_types import ConfigValueError
from kafka_sim.model_base import locked
from kafka_sim.cordons import placement_failure
from kafka_sim.placement import assign_replicas
from kafka_sim.state import Partition, Topic

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def valid_topic_name(name: str) -> bool:
    """Kafka's topic name rule: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    return 0 < len(name) <= 249 and name not in (".", "..") and _LEGAL_TOPIC.fullmatch(name) is not None


class Topics:
    """Mixin of ClusterModel: CreateTopics, DeleteTopics, CreatePartitions."""

    # ------------------------------------------------------------ topics
    @locked
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> tuple[int, str | None]:
        """CreateTopics for one topic (rack-aware placement when no assignment is given).

        :param name: topic name
        :param num_partitions: partitions, -1 for the broker default
        :param replication_factor: replicas per partition, -1 for the broker default
        :param assignments: partition -> replicas (then counts must be -1)
        :param configs: topic config overrides
        :param validate_only: check only, create nothing
        """
        self._run(self.now())
        if not valid_topic_name(name):
            return E.INVALID_TOPIC_EXCEPTION, (f"Topic name \"{name}\" is illegal, it contains a character other "
                                               "than ASCII alphanumerics, '.', '_' and '-'" if name else
                                               "Topic name is illegal, it can't be empty")
        if name in self.topics:
            return E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        try:
            cfg = validate_topic_configs(configs or {})
        except ConfigValueError as exc:
            return E.INVALID_CONFIG, str(exc)
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                return E.INVALID_REQUEST, ("Both numPartitions or replicationFactor and replicasAssignments "
                                           "were set. Both cannot be used at the same time.")
            placement, failure = self._explicit_placement(assignments)
        else:
            placement, failure = self._default_placement(num_partitions, replication_factor)
        if failure is not None:
            return failure
        if validate_only:
            return E.NONE, None
        topic = Topic(name, uuid.uuid4(), name.startswith("__"), [], cfg)
        topic.refresh_throttles()
        self.topics[name] = topic
        self._add_partitions(topic, placement)
        self.writes["CreateTopics"] += 1
        self.state_version += 1
        return E.NONE, None

    def _explicit_placement(self, assignments: dict[int, list[int]]
                            ) -> tuple[dict[int, list[int]], tuple[int, str] | None]:
        """A CreateTopics replica assignment checked like Kafka: (placement, error or None)."""
        parts = sorted(assignments)
        if parts != list(range(len(parts))):
            return {}, (E.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence")
        if len({len(assignments[i]) for i in parts}) != 1:
            return {}, (E.INVALID_REPLICA_ASSIGNMENT, ("All partitions in the manual partition assignment must "
                                                       "have the same number of replicas."))
        for i in parts:
            msg = self._validate_assignment([int(b) for b in assignments[i]])
            if msg is not None:
                return {}, (E.INVALID_REPLICA_ASSIGNMENT, msg)
        return {i: [int(b) for b in assignments[i]] for i in parts}, None

    def _default_placement(self, num_partitions: int, replication_factor: int
                           ) -> tuple[dict[int, list[int]], tuple[int, str] | None]:
        """Rack-aware placement for counts (-1 = broker default): (placement, error or None)."""
        n = num_partitions if num_partitions != -1 else int(self.configs.value(None, "num.partitions") or 1)
        rf = replication_factor if replication_factor != -1 else int(
            self.configs.value(None, "default.replication.factor") or 1)
        if n <= 0:
            return {}, (E.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if rf <= 0:
            return {}, (E.INVALID_REPLICATION_FACTOR, ("Replication factor must be larger than 0, or -1 to use "
                                                       "the default value."))
        usable = self.placeable_brokers()
        if rf > len(usable):
            return {}, (E.INVALID_REPLICATION_FACTOR, placement_failure(rf, len(usable)))
        return assign_replicas(usable, n, rf, 0, self._rng), None

    def _add_partitions(self, topic: Topic, placement: dict[int, list[int]]) -> None:
        for i in sorted(placement):
            replicas = placement[i]
            part = Partition(self, topic.name, i, replicas, replicas[0], 0.0, 0.0)
            for b in replicas:
                path = self._preferred_dirs.pop((b, topic.name, i), None) or self._pick_dir(b)
                self._place(part, b, path, True)
            # Kafka elects the first live replica; offline replicas stay out of the ISR
            part.isr = [b for b in replicas if self.brokers[b].alive] or [replicas[0]]
            part.leader = self._first_live_isr(part)
            for b in replicas:
                if b not in part.isr:
                    part._reps[b].tracking = False
            topic.partitions.append(part)
            self._touch(part)
        self._flush_dirty()

    @locked
    def delete_topic(self, name: str) -> tuple[int, str | None]:
        """DeleteTopics for one topic.

        :param name: topic name
        """
        self._run(self.now())
        topic = self.topics.pop(name, None)
        if topic is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        for p in topic.partitions:
            for b in list(p._reps):
                self._remove_replica(p, b)
            self._inflight.pop((name, p.index), None)
            self._dirty.add(p)
        for key in [k for k in self._preferred_dirs if k[1] == name]:
            del self._preferred_dirs[key]
        self._flush_dirty()
        self.writes["DeleteTopics"] += 1
        self.state_version += 1
        return E.NONE, None

    @locked
    def create_partitions(self, topic: str, count: int, assignments: list[list[int]] | None = None,
                          validate_only: bool = False) -> tuple[int, str | None]:
        """CreatePartitions: grow a topic to ``count`` partitions.

        :param topic: topic name
        :param count: the new total partition count
        :param assignments: replicas of each new partition (optional)
        :param validate_only: check only, create nothing
        """
        self._run(self.now())
        t = self.topics.get(topic)
        if t is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."
        current = len(t.partitions)
        if count < current:
            return E.INVALID_PARTITIONS, (f"Topic currently has {current} partitions, which is higher than the "
                                          f"requested {count}.")
        if count == current:
            return E.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        rf = len(t.partitions[0].target_replicas()) if t.partitions else 1
        if assignments:
            if len(assignments) != count - current:
                return E.INVALID_REPLICA_ASSIGNMENT, (
                    f"Increasing the number of partitions by {count - current} but {len(assignments)} "
                    "assignments provided.")
            for replicas in assignments:
                msg = self._validate_assignment([int(b) for b in replicas])
                if msg is not None:
                    return E.INVALID_REPLICA_ASSIGNMENT, msg
                if len(replicas) != rf:
                    return E.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes a partition "
                                                          f"with {len(replicas)} replica(s), but this is not "
                                                          f"consistent with previous partitions, which have {rf} "
                                                          "replica(s).")
            placement = {current + i: [int(b) for b in r] for i, r in enumerate(assignments)}
        else:
            usable = self.placeable_brokers()
            if rf > len(usable):
                return E.INVALID_REPLICATION_FACTOR, placement_failure(rf, len(usable))
            placement = assign_replicas(usable, count - current, rf, current, self._rng)
        if validate_only:
            return E.NONE, None
        self._add_partitions(t, placement)
        self.writes["CreatePartitions"] += 1
        self.state_version += 1
        return E.NONE, None

