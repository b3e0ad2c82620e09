"""Tiered storage (KIP-405): which topics keep part of their log in remote storage, and how
many bytes of a partition stay there when it moves.

A reassignment copies only the local log: since Kafka 3.8 (KIP-1023) a new follower of a
tiered partition starts fetching at the leader's earliest local offset, and DescribeLogDirs'
``partition_size`` is the local log only. No admin API reports the remote size, so it is
estimated from three ListOffsets answers of the leader: the log-start offset (-2, counts the
remote segments), the earliest local offset (-4, KIP-1005, ListOffsets v8+) and the log-end
offset (-1). The remote part holds ``local_start - log_start`` offsets; at the local log's
bytes per offset that is ``local_bytes * (local_start - log_start) / (log_end - local_start)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

#: The topic config that turns tiered storage on (KIP-405).
REMOTE_STORAGE_CONFIG = "remote.storage.enable"

#: ListOffsets timestamp selectors (KIP-405 / KIP-1005).
LATEST, EARLIEST, EARLIEST_LOCAL = -1, -2, -4
#: First ListOffsets version that answers EARLIEST_LOCAL.
EARLIEST_LOCAL_VERSION = 8


def is_tiered(configs: Mapping[str, str | None]) -> bool:
    """Whether a topic's configs turn tiered storage on.

    :param configs: the topic's config values (missing key: off, Kafka's default)
    """
    return str(configs.get(REMOTE_STORAGE_CONFIG) or "").strip().lower() == "true"


@dataclass(frozen=True)
class TieredOffsets:
    """A partition's offsets on its leader.

    :param log_start: first offset, remote segments included (ListOffsets -2)
    :param local_start: first offset of the leader's local log (ListOffsets -4)
    :param log_end: next offset to be written (ListOffsets -1)
    """

    log_start: int
    local_start: int
    log_end: int

    def remote_bytes(self, local_bytes: int) -> int:
        """Bytes estimated to be in remote storage only, from the local log's bytes per offset.

        0 when nothing lies below the local log or the local log holds no offsets (no rate to
        scale by: an empty local log says nothing of the remote segments' sizes).

        :param local_bytes: the leader's local log size (DescribeLogDirs)
        """
        remote_offsets = self.local_start - self.log_start
        local_offsets = self.log_end - self.local_start
        if remote_offsets <= 0 or local_offsets <= 0 or local_bytes <= 0:
            return 0
        return round(local_bytes * remote_offsets / local_offsets)


__all__ = ["REMOTE_STORAGE_CONFIG", "TieredOffsets", "is_tiered", "EARLIEST_LOCAL_VERSION",
           "LATEST", "EARLIEST", "EARLIEST_LOCAL"]
