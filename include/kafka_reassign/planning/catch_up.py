"""How fast a replica catching up under a KIP-73 quota gains on its log end, as real Kafka showed.

The fluid figure is ``R > (in-sync load) + P``: in-sync followers' fetches of a throttled
partition count in the leader's quota and the new replica must outrun the produce rate ``P``.
Apache Kafka 4.3.1 needs more (``benchmarks/preflight_stall.py`` measures where its move stops).
"""
from __future__ import annotations

import math

#: Share of what the quotas count that a catching-up replica gets into its log. Its fetch is
#: recorded as a whole ``replica.fetch.max.bytes`` (1 MiB) in both quotas, but only whole
#: batches are appended: on a log of 0.9 MB batches (librdkafka's ``batch.size`` default is
#: 1 MB) that is 86%. On Kafka 4.3.1, a new replica of a partition written at P with two
#: in-sync followers stopped gaining on the log end at 3.15-3.20 P, not 3 P
#: (``benchmarks/preflight_stall.py``).
CATCH_UP_FETCH_SHARE = 0.85
#: Stall points are kept this far above that: the quota is an on/off control
#: over 11 one-second samples, and produce rates are sampled over a few seconds.
STALL_MARGIN = 1.1


def throttle_needed(in_sync: float, catching_up: float) -> float:
    """The throttle above which replicas catching up on ``catching_up`` bytes/s of produce gain on the log end."""
    return STALL_MARGIN * (in_sync + catching_up / CATCH_UP_FETCH_SHARE)


# ------------------------------------------------------------------ KIP-113 moves between log dirs
#: ``replica.fetch.max.bytes``, ``replication.quota.window.num`` (samples of one second) and
#: ``replica.fetch.backoff.ms`` at Kafka's defaults: what the alter-log-dirs thread runs with
FETCH_MAX_BYTES = 1024 * 1024
QUOTA_SAMPLES = 11
BACKOFF_S = 1.0


def log_dir_copy_rate(size: float, bound: float) -> float:
    """Average bytes/s at which a broker moves ``size`` bytes between its log dirs under ``bound``.

    Not ``bound`` itself (apache/kafka, core/.../server): the alter-log-dirs thread reads
    ``replica.fetch.max.bytes`` at a time and records each whole read in the quota
    (``ReplicaAlterLogDirsThread.processPartitionData``) while only whole batches are appended
    (:data:`CATCH_UP_FETCH_SHARE` of it); once the rate is over the bound it builds no fetch
    (``LocalLeaderEndPoint.buildFetch``) and waits the 1 s back-off (``AbstractFetcherThread``).
    The quota's ``SimpleRate`` measures 11 one-second samples over the time since the oldest one
    started: from an empty window the copy keeps up with the bound (the first second's burst
    included) for 10 s, then each back-off lets in what takes the window back to 10 s of bound
    (and half a read above it) over 11 samples; the last bytes wait for a check, half a
    back-off on average. Kafka 4.3.1, 30 MB of 0.9 MB batches under
    3 MB/s: 12.7-13.4 s (``benchmarks/calibration_timed.py``, c), where ``size / bound`` says 10 s.

    :param size: bytes to copy (the replica's size)
    :param bound: replica.alter.log.dirs.io.max.bytes.per.second (``inf``: not limited)
    """
    if math.isinf(bound) or bound <= 0 or size <= 0:
        return bound
    recorded = size / CATCH_UP_FETCH_SHARE  # the quota counts whole reads
    ramp = (QUOTA_SAMPLES - 1) * bound  # recorded by the time the window is full
    overshoot = FETCH_MAX_BYTES / 2  # a burst ends at the first read above the bound
    if recorded <= bound + overshoot:
        return math.inf  # done in the first burst: as fast as the disks go
    if recorded <= ramp + overshoot:
        seconds = (recorded - overshoot) / bound
    else:
        seconds = (QUOTA_SAMPLES - 1) + (recorded - ramp - overshoot) / _steady_recorded(bound)
    return size / (seconds + BACKOFF_S / 2)


def _steady_recorded(bound: float) -> float:
    """Bytes/s the quota records once its window is full: 10 s of ``bound`` and half a read per 11 samples
    (one sample a back-off)."""
    return ((QUOTA_SAMPLES - 1) * bound + FETCH_MAX_BYTES / 2) / QUOTA_SAMPLES


def log_dir_throttle_needed(produce: float) -> float:
    """The KIP-113 limit above which a log-dir copy of a partition written at ``produce`` bytes/s gains on it."""
    return STALL_MARGIN * produce * QUOTA_SAMPLES / ((QUOTA_SAMPLES - 1) * CATCH_UP_FETCH_SHARE)
