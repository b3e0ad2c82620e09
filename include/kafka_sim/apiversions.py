"""Which API versions the simulated broker advertises.

The ranges are those an Apache Kafka 4.1 broker (KRaft) advertises in ApiVersions,
capped at what kafka-python 3.0.12's protocol classes can encode, and limited to the
APIs the simulator implements. Clients then pick the same versions they would
against a real 4.x cluster (flexible versions, topic ids in Fetch/Produce, ...).
"""
from __future__ import annotations

from kafka.protocol.admin import (
    AlterConfigsRequest, AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeLogDirsRequest, ElectLeadersRequest,
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
)
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

#: SASL versions advertised in ApiVersions and answered by :mod:`kafka_sim.auth` (Kafka 4.1
#: ranges; SaslHandshake v0, raw pre-1.0 tokens, is gone since KIP-896). Kept here, below
#: auth, so that advertising versions never imports the listener security.
SASL_API_RANGES: dict[int, tuple[int, int]] = {
    SaslHandshakeRequest.API_KEY: (1, 1), SaslAuthenticateRequest.API_KEY: (0, 2),
}

# (min, max) per API key as advertised by Apache Kafka 4.1 brokers, except DescribeLogDirs: v5
# (IsCordoned, KIP-1066) as Kafka 4.3 advertises it; a cluster without cordons caps it at 4.
KAFKA_41_RANGES: dict[int, tuple[int, int]] = {
    0: (0, 13), 1: (4, 18), 2: (1, 10), 3: (0, 13), 10: (0, 6), 18: (0, 4), 19: (2, 7),
    20: (1, 6), 22: (0, 5), 23: (2, 4), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5),
    37: (0, 3), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 60: (0, 2),
    **SASL_API_RANGES,
}

REQUEST_CLASSES = {
    cls.API_KEY: cls for cls in (
        ProduceRequest, FetchRequest, ListOffsetsRequest, MetadataRequest, FindCoordinatorRequest,
        ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, InitProducerIdRequest,
        OffsetForLeaderEpochRequest, DescribeConfigsRequest, AlterConfigsRequest,
        AlterReplicaLogDirsRequest, DescribeLogDirsRequest, CreatePartitionsRequest,
        ElectLeadersRequest, IncrementalAlterConfigsRequest, AlterPartitionReassignmentsRequest,
        ListPartitionReassignmentsRequest, DescribeClusterRequest, SaslHandshakeRequest,
        SaslAuthenticateRequest,
    )
}


def supported_versions() -> dict[int, tuple[int, int]]:
    """(min, max) version per implemented API key: Kafka 4.1's range capped by kafka-python."""
    out: dict[int, tuple[int, int]] = {}
    for key, (lo, hi) in KAFKA_41_RANGES.items():
        cls = REQUEST_CLASSES[key]
        hi = min(hi, cls.max_version)
        if lo <= hi:
            out[key] = (lo, hi)
    return out


SUPPORTED: dict[int, tuple[int, int]] = supported_versions()
