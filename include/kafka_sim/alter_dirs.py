"""The KIP-113 quota as Kafka's alter-log-dirs thread meets it: a fetch loop with a 1 s back-off.

What Kafka does (apache/kafka, core/src/main/scala/kafka/server):

- ``LocalLeaderEndPoint.buildFetch`` builds no fetch at all while the broker's alter-log-dirs
  quota is exceeded (``quota.isQuotaExceeded``); ``AbstractFetcherThread.maybeFetch`` then
  waits ``replica.fetch.backoff.ms`` (1 s) before it looks again.
- Otherwise one partition is read, ``replica.fetch.max.bytes`` (1 MiB) of its log:
  ``ReplicaAlterLogDirsThread.processPartitionData`` records the whole read in the quota
  (``quota.record(records.sizeInBytes)``, a partial last batch included) and the future log
  appends only the whole batches, reading the partial one again next time.
- The quota is the replication ``SimpleRate`` of ``replication.quota.window.num`` (11) samples
  of one second, a sample starting at the first record after the last one completed; the
  rate is the window's bytes over the time since the oldest retained sample's start (at
  least one sample), a sample is dropped once it started a whole window ago.

So a copy runs in bursts, one per back-off: a burst ends at the first fetch that takes the
rate above the bound, and the window measures the bursts of ten seconds against eleven.
Seen on Apache Kafka 4.3.1 (benchmarks/calibration_timed.py, scenario c): 30 MB of 0.9 MB
batches moved between the dirs of a broker with a 3 MB/s limit in 12.7-13.6 s, three batches
a second, where a fluid cap at the bound took 10.0 s. :func:`effective_rate` steps that loop
and gives the physics the average rate of the whole copy.
"""
from __future__ import annotations

import functools
import math

#: beyond this many back-offs the loop has long reached its periodic course: the rest of the
#: copy goes at the rate of the last window
_MAX_CYCLES = 60


@functools.lru_cache(maxsize=256)
def effective_rate(size: float, bound: float, batch: float, fetch_max: float, backoff: float = 1.0,
                   samples: int = 11, sample_s: float = 1.0) -> float:
    """Average bytes/s at which the alter-log-dirs thread copies ``size`` bytes under ``bound``.

    :param size: bytes to copy
    :param bound: replica.alter.log.dirs.io.max.bytes.per.second
    :param batch: record batch size on disk (0: unknown, every read appends what it read)
    :param fetch_max: replica.fetch.max.bytes
    :param backoff: replica.fetch.backoff.ms in seconds
    :param samples: replication.quota.window.num
    :param sample_s: replication.quota.window.size.seconds
    """
    if math.isinf(bound) or size <= 0 or fetch_max <= 0 or bound <= 0:
        return bound
    if batch >= fetch_max:
        read = appended = float(batch)  # KIP-74: a batch larger than the fetch comes alone
    elif batch > 0:
        read, appended = float(fetch_max), batch * math.floor(fetch_max / batch)
    else:
        read = appended = float(fetch_max)
    seconds = _copy_seconds(size, bound, read, appended, backoff, samples, sample_s)
    return size / seconds if seconds > 0 else math.inf  # done within the first burst


def _copy_seconds(size: float, bound: float, read: float, appended: float, backoff: float,
                  samples: int, sample_s: float) -> float:
    """Seconds the fetch loop takes for ``size`` bytes (extrapolated past ``_MAX_CYCLES`` back-offs)."""
    t, copied = 0.0, 0.0
    kept: list[list[float]] = []  # [start, bytes recorded] of each retained sample
    history: list[tuple[float, float]] = []  # (t, copied) at each back-off
    while copied < size:
        kept = [s for s in kept if t - s[0] < samples * sample_s]
        if kept and sum(s[1] for s in kept) / max(t - kept[0][0], sample_s) > bound:
            history.append((t, copied))
            if len(history) > _MAX_CYCLES:
                t0, c0 = next(h for h in history if h[0] >= t - samples * sample_s)
                if copied > c0:
                    return t + (size - copied) * (t - t0) / (copied - c0)
            t += backoff
            continue
        if not kept or t - kept[-1][0] >= sample_s:
            kept.append([t, 0.0])
        left = size - copied
        kept[-1][1] += min(read, left)
        copied += min(appended, left)
    return t
