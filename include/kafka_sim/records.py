"""RecordBatch (magic v2) header parsing for the simulated broker.

The simulator stores produced batches as opaque bytes; it only needs the fixed
61-byte batch header to count records, find offsets, check the CRC and track
idempotent-producer sequence numbers. Layout (Kafka's DefaultRecordBatch)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8
    crc uint32 (crc32c of everything after it) | attributes int16 | lastOffsetDelta int32
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16
    baseSequence int32 | recordCount int32 | records...
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.record.util import calc_crc32c

HEADER_SIZE = 61
_LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted in batchLength
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21  # offset of the attributes field: the crc covers attributes..end
# kafka-python's crc32c is pure Python (~8 ms per 64 KiB); checking bigger batches would
# stall the event loop that serves every broker, so they are only checked structurally.
CRC_CHECK_MAX_BYTES = 64 * 1024


class RecordBatchError(ValueError):
    """A produce payload that is not a well-formed v2 record batch (CORRUPT_MESSAGE)."""


@dataclass(frozen=True)
class BatchHeader:
    """The header of one v2 record batch and where it sits in the buffer."""

    position: int
    size: int  # whole batch including the 12-byte log overhead
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record."""
        return self.base_offset + self.last_offset_delta

    @property
    def is_transactional(self) -> bool:
        """Bit 4 of the attributes."""
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        """Bit 5 of the attributes."""
        return bool(self.attributes & 0x20)

    @property
    def last_sequence(self) -> int:
        """Sequence number of the batch's last record (wraps like Kafka's)."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def parse_batches(data: bytes | memoryview, verify_crc: bool = True) -> list[BatchHeader]:
    """Split a records blob into v2 batch headers.

    :param data: the records field of a Produce request (one or more batches)
    :param verify_crc: check each batch's crc32c as the broker does (batches up to
        CRC_CHECK_MAX_BYTES; larger ones get the structural checks only)
    :raises RecordBatchError: truncated data, old magic, bad length or CRC
    """
    view = memoryview(data)
    out: list[BatchHeader] = []
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise RecordBatchError(f"truncated record batch at byte {pos}")
        fields = _HEADER.unpack_from(view, pos)
        batch_length = fields[1]
        size = batch_length + _LOG_OVERHEAD
        if batch_length < HEADER_SIZE - _LOG_OVERHEAD or pos + size > end:
            raise RecordBatchError(f"record batch length {batch_length} out of range at byte {pos}")
        magic = fields[3]
        if magic != 2:
            # Produce v3+ only carries v2 batches; older formats are rejected by Kafka 4.
            raise RecordBatchError(f"unsupported record batch magic {magic}")
        if verify_crc and size <= CRC_CHECK_MAX_BYTES:
            crc = calc_crc32c(bytes(view[pos + _CRC_START:pos + size]))
            if crc != fields[4]:
                raise RecordBatchError(f"record batch CRC mismatch at byte {pos}")
        out.append(BatchHeader(
            position=pos, size=size, base_offset=fields[0], partition_leader_epoch=fields[2],
            magic=magic, crc=fields[4], attributes=fields[5], last_offset_delta=fields[6],
            base_timestamp=fields[7], max_timestamp=fields[8], producer_id=fields[9],
            producer_epoch=fields[10], base_sequence=fields[11], record_count=fields[12]))
        pos += size
    return out


def split_batches(data: bytes | memoryview, headers: list[BatchHeader]) -> list[bytes]:
    """The raw bytes of each batch, in order.

    :param data: the blob the headers were parsed from
    :param headers: result of :func:`parse_batches`
    """
    view = memoryview(data)
    return [bytes(view[h.position:h.position + h.size]) for h in headers]


def iter_batch_offsets(data: bytes | memoryview) -> list[tuple[int, int, int]]:
    """(base_offset, last_offset, size) of each batch in a stored blob, without CRC checks.

    :param data: one or more batches as stored by the model
    """
    return [(h.base_offset, h.last_offset, h.size) for h in parse_batches(data, verify_crc=False)]
