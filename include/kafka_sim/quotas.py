"""KIP-73 replication quotas as Kafka's ReplicationQuotaManager measures and enforces them.

What Kafka does (apache/kafka):

- ``ReplicationQuotaManager.record`` adds bytes to a ``SimpleRate`` sensor of
  ``replication.quota.window.num`` (11) samples of ``replication.quota.window.size.seconds``
  (1 s); ``isQuotaExceeded`` is true while that rate is above the bound.
  ``SimpleRate.windowSize`` is the time since the oldest retained sample, never less than
  one sample window, so a fresh sensor allows about one window of bytes at once and a
  sensor that has been recording for a while allows ``bound * 11 s - bytes in the window``.
- Leader side, ``KafkaApis.handleFetchRequest`` records the size of every follower fetch
  response for throttled partitions (``sizeOfThrottledPartitions``), from in-sync and
  out-of-sync followers alike; ``ReplicaManager.shouldLeaderThrottle`` holds back only
  followers that are not in the ISR, and only while the quota is exceeded.
- Follower side, ``ReplicaFetcherThread.processPartitionData`` records every fetched byte
  of throttled partitions ("traffic from both in-sync and out of sync replicas"), and
  ``RemoteLeaderEndPoint.shouldFollowerThrottle`` leaves out-of-sync partitions out of the
  next fetch while the quota is exceeded.

The model is a fluid version of that bang-bang control, so that it costs nothing per
tick: a :class:`QuotaMeter` keeps the bytes recorded in the window (``total``) and the
window length (``span``), both in closed form between events. While the allowance
``bound * span - total`` is positive, out-of-sync throttled flows are not held back;
once it reaches zero they share ``bound - in-sync recorded traffic`` (what keeps the
measured rate at the bound), and nothing at all while in-sync traffic alone is above it.
Bytes leave the window exponentially (time constant = the window) instead of a whole
sample at a time: the long-run rate and the allowance after steady in-sync traffic
(``11 s * (bound - in-sync)``) are Kafka's; the per-second sawtooth is not modelled.
"""
from __future__ import annotations

import math

#: replication.quota.window.num and replication.quota.window.size.seconds defaults.
DEFAULT_SAMPLES = 11
DEFAULT_SAMPLE_SECONDS = 1.0
#: Bytes of allowance below which a quota counts as exhausted (float rounding).
_EPS_BYTES = 1.0


class QuotaMeter:
    """Byte-rate sensor of one broker's leader or follower replication quota.

    :param samples: replication.quota.window.num
    :param sample_seconds: replication.quota.window.size.seconds
    :param aged: the sensor records all the time, so its window is always full: the leader
        side, where KafkaApis records every follower fetch response, zero bytes included.
        A follower-side sensor records only throttled partitions' bytes, starts fresh (one
        sample) and starts fresh again once every sample has gone obsolete.
    """

    __slots__ = ("window", "min_span", "total", "span", "t", "rate", "aged")

    def __init__(self, samples: int = DEFAULT_SAMPLES, sample_seconds: float = DEFAULT_SAMPLE_SECONDS,
                 aged: bool = False) -> None:
        self.window = samples * sample_seconds
        self.min_span = sample_seconds
        self.aged = aged
        self.total = 0.0  # bytes recorded in the window
        self.span = self.window if aged else sample_seconds  # SimpleRate.windowSize: at least one sample
        self.t: float | None = None  # time of the last update; None until something is recorded
        self.rate = 0.0  # bytes/s being recorded since self.t

    def advance(self, now: float) -> None:
        """Bring ``total`` and ``span`` to ``now`` at the current recording rate.

        :param now: simulated seconds
        """
        if self.t is None:
            if self.rate > 0:
                self.t = now
            return
        dt = now - self.t
        self.t = now
        if dt <= 0:
            return
        grow = min(dt, self.window - self.span) if self.span < self.window else 0.0
        if grow > 0:  # the sensor is younger than its window: nothing has expired yet
            self.total += self.rate * grow
            self.span += grow
            dt -= grow
        if dt > 0:
            target = self.rate * self.window
            self.total = target + (self.total - target) * math.exp(-dt / self.window)
        if self.rate == 0 and self.total < _EPS_BYTES and not self.aged:
            # every sample is obsolete: Kafka's next record starts a fresh window
            self.total, self.span, self.t = 0.0, self.min_span, None

    def set_rate(self, now: float, rate: float) -> None:
        """Change the recording rate from ``now`` on.

        :param now: simulated seconds
        :param rate: bytes/s recorded from now on
        """
        self.advance(now)
        self.rate = max(0.0, rate)
        if self.t is None and self.rate > 0:
            self.t = now

    def allowance(self, bound: float) -> float:
        """Bytes that can still be recorded before ``isQuotaExceeded`` turns true.

        :param bound: the quota in bytes/s
        """
        return bound * self.span - self.total

    def band(self, bound: float) -> float:
        """Allowance within which the quota counts as at its bound (half a sample's worth).

        Kafka lets a fetch through whenever the rate dips under the bound; in the fluid
        model an allowance this small is spent at the bound instead of in a burst, which
        keeps quotas at their bound from flipping at every re-plan.

        :param bound: the quota in bytes/s
        """
        return max(_EPS_BYTES, bound * self.min_span / 2)

    def seconds_to_cross(self, bound: float, level: float = 0.0) -> float:
        """Seconds until the allowance, moving at the current rate, reaches ``level`` (inf if never).

        :param bound: the quota in bytes/s
        :param level: allowance in bytes to reach
        """
        a = self.allowance(bound) - level
        rate = self.rate
        elapsed = 0.0
        span_left = self.window - self.span
        if span_left > 0:
            slope = bound - rate  # the allowance grows with the span, shrinks with what is recorded
            if slope != 0 and (a > 0) != (slope > 0):
                t = -a / slope
                if t <= span_left:
                    return t if t > 1e-9 else math.inf
            a += slope * span_left
            elapsed = span_left
        # then total(t) = target + (total - target) * exp(-t / window); when does it reach the limit?
        limit = bound * self.window - level
        total = limit - a
        target = rate * self.window
        if limit == target:
            return math.inf
        ratio = (total - target) / (limit - target)
        if ratio <= 1.0 + 1e-12:
            return math.inf
        return elapsed + self.window * math.log(ratio)
