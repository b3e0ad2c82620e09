"""Hand-encoded pieces of flexible (KIP-482) protocol bodies, for responses the handlers build
often and large: encoding through kafka-python's classes cost more than the model's answer."""
from __future__ import annotations

import struct
from typing import Iterable

_INT32 = struct.Struct(">i")
#: an empty tagged-field section
NO_TAGS = b"\x00"


def uvarint(n: int) -> bytes:
    """Unsigned varint (compact array and string lengths)."""
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def compact_string(value: str | None) -> bytes:
    """COMPACT_NULLABLE_STRING: uvarint length + 1 (0 for null), then UTF-8."""
    if value is None:
        return b"\x00"
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def compact_int32s(values: Iterable[int]) -> bytes:
    """COMPACT_ARRAY of INT32."""
    items = list(values)
    return uvarint(len(items) + 1) + struct.pack(f">{len(items)}i", *items)


def reassignment_entry(partition: int, replicas: Iterable[int], adding: Iterable[int],
                       removing: Iterable[int]) -> bytes:
    """One partition of a ListPartitionReassignments v0 response (OngoingPartitionReassignment)."""
    return b"".join((_INT32.pack(partition), compact_int32s(replicas), compact_int32s(adding),
                     compact_int32s(removing), NO_TAGS))


def list_reassignments_body(rows: list[tuple[str, int, list[int], list[int], list[int]]]) -> bytes:
    """ListPartitionReassignments v0 response body (flexible), no error: the model's rows, topics by name.

    :param rows: (topic, partition, replicas, adding, removing), a topic's rows together
    """
    return reassignments_body([(topic, reassignment_entry(partition, replicas, adding, removing))
                               for topic, partition, replicas, adding, removing in rows])


def reassignments_body(entries: list[tuple[str, bytes]]) -> bytes:
    """The response body of encoded partition entries (:func:`reassignment_entry`), topics by name.

    :param entries: (topic, encoded partition), a topic's entries together, in partition order
    """
    by_topic: dict[str, list[bytes]] = {}
    for topic, entry in entries:
        by_topic.setdefault(topic, []).append(entry)
    parts = [_INT32.pack(0), b"\x00\x00", compact_string(None), uvarint(len(by_topic) + 1)]
    for name in sorted(by_topic):
        encoded = by_topic[name]
        parts += [compact_string(name), uvarint(len(encoded) + 1), *encoded, NO_TAGS]
    parts.append(NO_TAGS)
    return b"".join(parts)
