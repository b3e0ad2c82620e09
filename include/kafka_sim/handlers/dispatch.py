"""The request handlers of a simulated cluster, one mixin per request family, and the dispatch."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from kafka_sim.handlers.base import RequestContext, Runtime
from kafka_sim.handlers.fetch import FetchHandlers
from kafka_sim.handlers.metadata import MetadataHandlers
from kafka_sim.handlers.produce import ProduceHandlers
from kafka_sim.handlers.replica_admin import ReplicaAdminHandlers
from kafka_sim.handlers.topic_admin import TopicAdminHandlers


class Handlers(MetadataHandlers, ProduceHandlers, FetchHandlers, TopicAdminHandlers, ReplicaAdminHandlers):
    """Turns decoded requests into responses against one cluster model.

    :param runtime: the server runtime (model, broker endpoints, wake-ups)
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.model = runtime.model
        self._init_producers()
        self._init_metadata_caches()
        self._reassignment_entries = {}
        self._table: dict[int, Callable[[RequestContext, Any], Any]] = {
            0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata,
            10: self.find_coordinator, 18: self.api_versions, 19: self.create_topics,
            20: self.delete_topics, 22: self.init_producer_id, 23: self.offset_for_leader_epoch,
            32: self.describe_configs, 33: self.alter_configs, 34: self.alter_replica_log_dirs,
            35: self.describe_log_dirs, 37: self.create_partitions, 43: self.elect_leaders,
            44: self.incremental_alter_configs, 45: self.alter_partition_reassignments,
            46: self.list_partition_reassignments, 60: self.describe_cluster,
        }

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        """Run the handler for ``ctx.api_key``; returns a response, a RawBody or None (acks=0).

        :param ctx: request context
        :param request: the decoded request object
        """
        fn = self._table[ctx.api_key]
        result = fn(ctx, request)
        if asyncio.iscoroutine(result):
            result = await result
        return result
