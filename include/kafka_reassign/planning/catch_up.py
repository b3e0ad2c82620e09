"""How fast a replica catching up under a KIP-73 quota gains on its log end, as real Kafka showed.

The fluid figure is ``R > (in-sync load) + P``: in-sync followers' fetches of a throttled
partition count in the leader's quota and the new replica must outrun the produce rate ``P``.
Apache Kafka 4.3.1 needs more (``benchmarks/preflight_stall.py`` measures where its move stops).
"""
from __future__ import annotations

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
