"""Kafka protocol error codes used by the simulator.

The numbers are Kafka's (``org.apache.kafka.common.protocol.Errors``); model methods
return them as plain ints together with a message, never raise for a Kafka-level error.
"""
from __future__ import annotations

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
BROKER_NOT_AVAILABLE = 8
REPLICA_NOT_AVAILABLE = 9
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56
LOG_DIR_NOT_FOUND = 57
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
UNKNOWN_TOPIC_ID = 100

# Codes only the wire server answers with (coordinators, producers, epochs, versions).
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_REQUIRED_ACKS = 21
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_ENDPOINT_TYPE = 115

#: code -> Kafka's error name, for messages and logs.
NAMES: dict[int, str] = {
    value: name
    for name, value in list(globals().items())
    if name.isupper() and isinstance(value, int) and name != "NAMES"
}


def name_of(code: int) -> str:
    """Kafka's name for an error code.

    :param code: the numeric error code
    """
    return NAMES.get(code, f"UNKNOWN_ERROR_{code}")
