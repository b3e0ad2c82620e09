"""Handlers of topic and config administration: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs."""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterConfigsResponse, CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse,
    DescribeConfigsResponse, IncrementalAlterConfigsResponse,
)

from kafka_sim.errors import INVALID_REQUEST, NONE
from kafka_sim.handlers.base import ZERO_UUID, HandlerBase, RequestContext


class TopicAdminHandlers(HandlerBase):
    """CreateTopics, DeleteTopics, CreatePartitions and the config requests."""

    # ------------------------------------------------------------------ topics
    def create_topics(self, ctx: RequestContext, request: Any) -> Any:
        """CreateTopics (explicit assignments or partitions + RF, configs, validate_only)."""
        v = ctx.api_version
        R = CreateTopicsResponse
        TopicR = R.CreatableTopicResult
        names = [t.name for t in request.topics]
        dups = {n for n in names if names.count(n) > 1}
        out = []
        with self.model.lock:
            for t in request.topics:
                if t.name in dups:
                    code, msg = INVALID_REQUEST, "Duplicate topic name in request."
                else:
                    assignments = ({a.partition_index: list(a.broker_ids) for a in t.assignments}
                                   if t.assignments else None)
                    configs = {c.name: c.value for c in t.configs}
                    code, msg = self.model.create_topic(t.name, t.num_partitions, t.replication_factor,
                                                        assignments, configs, request.validate_only)
                kw: dict[str, Any] = dict(name=t.name, error_code=code, error_message=msg)
                if v >= 5:
                    topic = self.model.topics.get(t.name) if code == NONE else None
                    if topic is not None and not request.validate_only:
                        kw.update(topic_id=topic.topic_id, num_partitions=len(topic.partitions),
                                  replication_factor=len(topic.partitions[0].replicas) if topic.partitions else -1,
                                  configs=self._topic_config_list(t.name))
                    elif code == NONE:
                        nparts = (len(t.assignments) if t.assignments else t.num_partitions)
                        rf = (len(t.assignments[0].broker_ids) if t.assignments else t.replication_factor)
                        kw.update(topic_id=ZERO_UUID, num_partitions=nparts, replication_factor=rf,
                                  configs=[])
                    else:
                        kw.update(topic_id=ZERO_UUID, num_partitions=-1, replication_factor=-1, configs=None)
                out.append(TopicR(**kw))
        if any(r.error_code == NONE for r in out) and not request.validate_only:
            self.runtime.notify()
        return R(version=v, throttle_time_ms=0, topics=out)

    def _topic_config_list(self, topic: str) -> list[Any]:
        Conf = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
        code, _msg, entries = self.model.describe_configs(2, topic, None)
        if code != NONE:
            return []
        return [Conf(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                     is_sensitive=e.is_sensitive) for e in entries]

    def delete_topics(self, ctx: RequestContext, request: Any) -> Any:
        """DeleteTopics by name (v0-5) or by name/id (v6+)."""
        v = ctx.api_version
        R = DeleteTopicsResponse
        out = []
        with self.model.lock:
            if v >= 6:
                items = [(t.name, t.topic_id) for t in request.topics]
            else:
                items = [(n, None) for n in request.topic_names]
            for name, tid in items:
                by_id = name is None
                topic, code = self._resolve_topic(name, tid, by_id)
                msg = None
                if topic is not None:
                    resolved = topic.name
                    code, msg = self.model.delete_topic(resolved)
                    name = resolved
                    tid = topic.topic_id
                out.append(R.DeletableTopicResult(name=name, topic_id=tid or ZERO_UUID,
                                                  error_code=code, error_message=msg))
        self.runtime.notify()
        return R(version=v, throttle_time_ms=0, responses=out)

    def create_partitions(self, ctx: RequestContext, request: Any) -> Any:
        """CreatePartitions (grow a topic, optional explicit assignment)."""
        R = CreatePartitionsResponse
        out = []
        with self.model.lock:
            for t in request.topics:
                assignments = ([list(a.broker_ids) for a in t.assignments]
                               if t.assignments is not None else None)
                code, msg = self.model.create_partitions(t.name, t.count, assignments,
                                                         request.validate_only)
                out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=msg))
        self.runtime.notify()
        return R(version=ctx.api_version, throttle_time_ms=0, results=out)

    # ------------------------------------------------------------------ configs
    def describe_configs(self, ctx: RequestContext, request: Any) -> Any:
        """DescribeConfigs for topic (2) and broker (4) resources, with sources and synonyms."""
        v = ctx.api_version
        R = DescribeConfigsResponse
        ResR = R.DescribeConfigsResult
        EntR = ResR.DescribeConfigsResourceResult
        SynR = EntR.DescribeConfigsSynonym
        out = []
        with self.model.lock:
            for res in request.resources:
                keys = list(res.configuration_keys) if res.configuration_keys is not None else None
                code, msg, entries = self.model.describe_configs(res.resource_type, res.resource_name, keys)
                configs = []
                for e in entries if code == NONE else []:
                    syns = []
                    if request.include_synonyms:
                        for s in e.synonyms or []:
                            sn, sv, ss = _synonym_tuple(s)
                            syns.append(SynR(name=sn, value=sv, source=ss))
                    configs.append(EntR(name=e.name, value=e.value, read_only=e.read_only,
                                        config_source=e.source, is_default=e.source == 5,
                                        is_sensitive=e.is_sensitive, synonyms=syns,
                                        config_type=int(getattr(e, "config_type", 0) or 0),
                                        documentation=getattr(e, "documentation", None)
                                        if request.include_documentation else None))
                out.append(ResR(error_code=code, error_message=msg, resource_type=res.resource_type,
                                resource_name=res.resource_name, configs=configs))
        return R(version=v, throttle_time_ms=0, results=out)

    def incremental_alter_configs(self, ctx: RequestContext, request: Any) -> Any:
        """IncrementalAlterConfigs: SET/DELETE/APPEND/SUBTRACT per key."""
        R = IncrementalAlterConfigsResponse
        out = []
        with self.model.lock:
            for res in request.resources:
                ops = [(c.name, c.config_operation, c.value) for c in res.configs]
                code, msg = self.model.incremental_alter_configs(res.resource_type, res.resource_name,
                                                                 ops, request.validate_only)
                out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                          resource_type=res.resource_type,
                                                          resource_name=res.resource_name))
        return R(version=ctx.api_version, throttle_time_ms=0, responses=out)

    def alter_configs(self, ctx: RequestContext, request: Any) -> Any:
        """AlterConfigs (legacy): replaces the resource's whole dynamic config set."""
        R = AlterConfigsResponse
        out = []
        with self.model.lock:
            for res in request.resources:
                configs = {c.name: c.value for c in res.configs}
                code, msg = self.model.alter_configs(res.resource_type, res.resource_name, configs,
                                                     request.validate_only)
                out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                          resource_type=res.resource_type,
                                                          resource_name=res.resource_name))
        return R(version=ctx.api_version, throttle_time_ms=0, responses=out)


def _synonym_tuple(s: Any) -> tuple[str, str | None, int]:
    if isinstance(s, tuple):
        return s[0], s[1], int(s[2])
    return s.name, s.value, int(s.source)
