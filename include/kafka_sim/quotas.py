"""KIP-73 replication quotas as Kafka's ReplicationQuotaManager measures and enforces them.

What Kafka does (apache/kafka):

- ``ReplicationQuotaManager.record`` adds bytes to a ``SimpleRate`` sensor of
  ``replication.quota.window.num`` (11) samples of ``replication.quota.window.size.seconds``
  (1 s); ``isQuotaExceeded`` is true while that rate is above the bound.
  ``SimpleRate.windowSize`` is the time since the oldest retained sample, never less than
  one sample window, so a fresh sensor allows about one window of bytes at once and a
  sensor that has been recording for a while allows ``bound * span - bytes in the span``.
  ``SampledStat`` keeps 12 samples and purges one once its last event is 11 s old, so
  past its first window a sensor's span runs from 11 to 12 s and falls back each second.
- Leader side, ``KafkaApis.handleFetchRequest`` records the size of every follower fetch
  response for throttled partitions (``sizeOfThrottledPartitions``), from in-sync and
  out-of-sync followers alike; ``ReplicaManager.shouldLeaderThrottle`` holds back only
  followers that are not in the ISR, and only while the quota is exceeded.
- Follower side, ``ReplicaFetcherThread.processPartitionData`` records every fetched byte
  of throttled partitions ("traffic from both in-sync and out of sync replicas"), and
  ``RemoteLeaderEndPoint.shouldFollowerThrottle`` leaves out-of-sync partitions out of the
  next fetch while the quota is exceeded.

The model is a fluid version of that bang-bang control, so that it costs nothing per
tick: a :class:`QuotaMeter` keeps the cumulative bytes recorded as a piecewise-linear
function of time (breakpoints where the recording rate changed or a lump was recorded)
over the last window, so the bytes in the window are exact in closed form between events.
While the allowance ``bound * span - bytes in the window`` is positive, out-of-sync
throttled flows are not held back; once it reaches zero they share ``bound - in-sync
recorded traffic`` (what keeps the measured rate at the bound), and nothing at all while
in-sync traffic alone is above it. Bytes leave the window with their whole sample, as in
Kafka: between purges the span's start stays put and only its end grows (the sawtooth).
An earlier version let bytes leave exponentially; calibration against Apache Kafka 4.3.1
(benchmarks/calibration.py, docs/SIMULATOR.md) showed that made a leader quota filled by
in-sync traffic last about 40% longer than Kafka's; a later one slid a window of exactly
11 s on the leader side, which made a leader-bound move 20% slower than Kafka's (g).
"""
from __future__ import annotations

import bisect
import math

#: replication.quota.window.num and replication.quota.window.size.seconds defaults.
DEFAULT_SAMPLES = 11
DEFAULT_SAMPLE_SECONDS = 1.0
#: Bytes of allowance below which a quota counts as exhausted (float rounding).
_EPS_BYTES = 1.0
#: Seconds a floor widens a span by, for the rounding of its ends (QuotaMeter._never_crosses).
_SLACK_S = 1e-5
_NO_BEFORE = (math.nan, 0.0)  # QuotaMeter._before when nothing is kept (nan equals no window start)


class QuotaMeter:
    """Byte-rate sensor of one broker's leader or follower replication quota.

    :param samples: replication.quota.window.num
    :param sample_seconds: replication.quota.window.size.seconds
    :param aged: the sensor records all the time, so its window is always full: the leader
        side, where KafkaApis records every follower fetch response, zero bytes included; its
        samples run on a grid of whole samples from the broker's start (model time 0).
        A follower-side sensor records only throttled partitions' bytes, starts fresh (one
        sample) and starts fresh again once every sample has gone obsolete.
    """

    __slots__ = ("window", "min_span", "aged", "t", "rate", "first", "ts", "cs", "version", "_break", "_never",
                 "_lump_at", "_allowance", "_keep", "_before")

    def __init__(self, samples: int = DEFAULT_SAMPLES, sample_seconds: float = DEFAULT_SAMPLE_SECONDS,
                 aged: bool = False) -> None:
        self.window = samples * sample_seconds
        self.min_span = sample_seconds
        # history kept by advance: the oldest retained sample may start up to one sample before the window
        self._keep = self.window + self.min_span
        self.aged = aged
        self.t: float | None = None  # time of the last update; None until something is recorded
        self.rate = 0.0  # bytes/s being recorded since the last breakpoint
        self.first: float | None = None  # first record of this sensor's life (SimpleRate's oldest sample)
        # cumulative recorded bytes at breakpoints; linear in between, at self.rate after the last.
        # A lump is two breakpoints at the same time (before, after).
        self.ts: list[float] = []
        self.cs: list[float] = []
        # bumped whenever the allowance's future course changes (rate, lump, fresh window);
        # the next break below is valid, in absolute time, until it is bumped
        self.version = 0
        self._break: tuple[int, float] | None = None  # version, time
        self._never: tuple[int, float, float] | None = None  # version, bound, level that never cross
        self._lump_at = -math.inf  # time of the last lump recorded
        self._allowance: tuple[float | None, int, float, float] = (None, -1, 0.0, 0.0)  # t, version, bound, value
        # window start, bytes before it (allowance), kept while the start is at or before the last breakpoint:
        # changes append after it, so only a fresh window or an overwritten last one moves it
        self._before = _NO_BEFORE

    # -- the cumulative curve
    def _cum(self, x: float, left: bool = False) -> float:
        """Bytes recorded up to time ``x`` (``left``: not counting a lump recorded exactly at x)."""
        ts, cs = self.ts, self.cs
        if not ts or x <= ts[0]:
            return cs[0] if cs else 0.0
        # on the segment from the last breakpoint before x (at the current rate past the last one)
        i = (bisect.bisect_left(ts, x) if left else bisect.bisect_right(ts, x)) - 1
        t0, c0 = ts[i], cs[i]
        if i + 1 < len(ts):
            t1 = ts[i + 1]
            slope = (cs[i + 1] - c0) / (t1 - t0) if t1 > t0 else 0.0
        else:
            slope = self.rate
        return c0 + slope * (x - t0)

    def _tail(self, x: float) -> float:
        """Start of the oldest retained sample at ``x`` (SampledStat.oldest after the purge).

        A follower-side sensor's samples are ``min_span`` long from its first record on
        (SampledStat.advance starts a sample when the current one is complete), and
        SampledStat.purgeObsoleteSamples drops a whole sample once its last event is a
        window old, so the rate is taken from the start of the oldest retained sample: the
        span grows from the window to the window plus one sample, then drops by a sample
        together with that sample's bytes. A sliding window of fixed length instead let a
        fresh sensor's first burst (a sample's worth recorded at once) leave a window later
        while the span stayed put: a spurious sample of allowance, seen in calibration as a
        20 MB move at 2 MB/s finishing 0.6 s early. A leader-side (aged) sensor is past its
        first window from the start, so its span is always on that sawtooth; taken as exactly
        the window instead, a leader-bound move (calibration g) took 20% longer than Kafka's.
        A record at a sample's start is in that sample (it started it).
        """
        origin = 0.0 if self.aged else self.first
        if origin is None:
            return x
        d = x - origin
        if d < self.window and not self.aged:
            return origin
        return origin + math.floor((d - self.window) / self.min_span + 1e-9) * self.min_span

    def _span(self, x: float) -> float:
        """SimpleRate.windowSize at ``x``: time since the oldest sample, at least one sample."""
        return max(self.min_span, x - self._tail(x))

    def _in_span(self, x: float, tail: float) -> float:
        """Bytes recorded from ``tail`` (a lump there included) to ``x``."""
        return self._cum(x) - self._cum(tail, left=True)

    def _allowance_at(self, bound: float, x: float, left: bool = False,
                      tails: dict[float, float] | None = None) -> float:
        """Allowance at ``x``, at or after the meter's last breakpoint (its time now, or a time the
        crossing walk looks ahead to; ``left``: just before x, so before a sample purge at x too).

        The bytes recorded up to ``x`` come from the current rate, without searching the
        breakpoints: the walk asks this a few dozen times per crossing, and crossings were a
        tenth of a large rehearsal. ``_in_span`` gives the same floats (unit/test_sim_quota_events).

        :param tails: window start -> bytes recorded before it, kept by a walk (both ends of a segment
            between purges start at the same sample: one search for the two); None: ``_before``
        """
        tail = self._tail(x - 1e-6 if left else x)
        span = x - tail
        ts, cs = self.ts, self.cs
        # at the first breakpoint _cum answers the bytes before it (a lump there not yet counted)
        head = cs[0] if x <= ts[0] else cs[-1] + self.rate * (x - ts[-1])
        if tails is not None:
            before = tails.get(tail)
            if before is None:
                before = tails[tail] = self._cum(tail, left=True)
        elif left or self._before[0] != tail:
            before = self._cum(tail, left=True)
            if not left and tail <= ts[-1]:  # (past the last breakpoint the bytes depend on the rate)
                self._before = (tail, before)
        else:
            before = self._before[1]
        return bound * (span if span > self.min_span else self.min_span) - (head - before)

    @property
    def span(self) -> float:
        """The window length now."""
        return self._span(self.t) if self.t is not None else self._span(0.0)

    @property
    def total(self) -> float:
        """Bytes recorded in the window now."""
        if self.t is None:
            return 0.0
        return self._in_span(self.t, self._tail(self.t))

    # -- recording
    def _open(self, now: float) -> None:
        self.version += 1
        self.t = now
        if self.first is None:
            self.first = now
        if not self.ts:
            self.ts, self.cs = [now], [0.0]

    def advance(self, now: float) -> None:
        """Bring the meter to ``now`` at the current recording rate.

        :param now: simulated seconds
        """
        if self.t is None:
            if self.rate > 0 or self.aged:  # a leader-side sensor's span moves on from its first look
                self._open(now)
            return
        if now <= self.t:
            return
        self.t = now
        ts = self.ts
        # keep the last breakpoint before the window (the oldest retained sample may start up to
        # one sample before it): nothing to drop, and no search, unless a second one is that old
        if len(ts) > 1 and ts[1] <= now - self._keep:
            cut = bisect.bisect_right(ts, now - self._keep) - 1
            del ts[:cut], self.cs[:cut]
        if (not self.aged and self.rate == 0 and now - ts[-1] >= self.window
                and self.total < _EPS_BYTES):
            # every sample is obsolete: Kafka's next record starts a fresh window
            self.version += 1
            self.t = self.first = None
            self.ts, self.cs = [], []
            self._before = _NO_BEFORE

    def set_rate(self, now: float, rate: float) -> None:
        """Change the recording rate from ``now`` on.

        :param now: simulated seconds
        :param rate: bytes/s recorded from now on
        """
        t = self.t
        if t is None or now > t:
            self.advance(now)  # (it does nothing otherwise)
            t = self.t
        rate = max(0.0, rate)
        if t is not None and rate != self.rate:
            self.version += 1
            ts, cs = self.ts, self.cs
            last = ts[-1]
            if now <= ts[0]:  # _cum(now), without its search where now is past every breakpoint
                c = cs[0]
            elif now >= last:
                c = cs[-1] + self.rate * (now - last)
            else:
                c = self._cum(now)
                self._before = _NO_BEFORE  # (a breakpoint before the last one)
            if last == now:
                if cs[-1] != c:
                    self._before = _NO_BEFORE
                cs[-1] = c
            else:
                ts.append(now)
                cs.append(c)
        self.rate = rate
        if self.t is None and rate > 0:
            self._open(now)

    def record(self, now: float, nbytes: float) -> None:
        """Record a lump of bytes at ``now`` (in-sync followers fetching produced records).

        :param now: simulated seconds
        :param nbytes: bytes fetched at once
        """
        self.advance(now)
        if self.t is None:
            self._open(now)  # the first record of a fresh (or expired) sensor opens its window
        self.version += 1
        self._lump_at = now
        ts, cs = self.ts, self.cs
        # _cum(now), without its search where now is past every breakpoint
        if now <= ts[0]:
            c = cs[0]
        elif now >= ts[-1]:
            c = cs[-1] + self.rate * (now - ts[-1])
        else:
            c = self._cum(now)
            self._before = _NO_BEFORE  # (a breakpoint before the last one)
        ts += [now, now]
        cs += [c, c + max(0.0, nbytes)]

    # -- the quota
    def allowance(self, bound: float) -> float:
        """Bytes that can still be recorded before ``isQuotaExceeded`` turns true.

        :param bound: the quota in bytes/s
        """
        kept = self._allowance
        if kept[0] == self.t and kept[1] == self.version and kept[2] == bound:
            return kept[3]  # asked again before anything changed (a plan asks twice per quota)
        value = bound * self.span if self.t is None else self._allowance_at(bound, self.t)
        self._allowance = (self.t, self.version, bound, value)
        return value

    def band(self, bound: float) -> float:
        """Allowance within which the quota counts as at its bound (half a sample's worth).

        Kafka lets a fetch through whenever the rate dips under the bound; in the fluid
        model an allowance this small is spent at the bound instead of in a burst, which
        keeps quotas at their bound from flipping at every re-plan.

        :param bound: the quota in bytes/s
        """
        return max(_EPS_BYTES, bound * self.min_span / 2)

    def bound_rate(self, bound: float) -> float:
        """Recording rate that holds the allowance where it is now, until the next break.

        At the bound Kafka lets through what the span grows by: between purges the span
        starts at the oldest retained sample, so nothing leaves it (a fresh follower-side
        sensor's first sample neither grows nor loses anything).

        :param bound: the quota in bytes/s
        """
        if self.t is None or self.first is None:
            return 0.0
        return bound if self.aged or self.t - self.first >= self.min_span - 1e-9 else 0.0

    def next_break(self) -> float:
        """Seconds until the allowance's slope next changes or it jumps (inf if never): the
        first of :meth:`_breaks`, found without listing them (a quota at its bound asks this
        at every change of its course)."""
        if self.t is None:
            return math.inf
        now, ms = self.t, self.min_span
        origin, k, purges = self._purge_grid(now)
        first = math.inf
        for i in range(purges):  # increasing: the first one ahead is the next purge
            x = origin + self.window + (k + i) * ms - now
            if x > 1e-12:
                first = x
                break
        if not self.aged and 1e-12 < origin + ms - now < first:
            first = origin + ms - now
        return first

    def _purge_grid(self, now: float) -> tuple[float, int, int]:
        """(origin of the samples, index of the next purge after the window, purges to look at)."""
        ms, w = self.min_span, self.window
        origin = 0.0 if self.aged else self.first
        assert origin is not None
        d = now - origin
        k = math.floor((d - w if self.aged else max(0.0, d - w)) / ms + 1e-9) + 1
        return origin, k, int(w / ms) + 3

    def _breaks(self, now: float, limit: int | None = None) -> list[float]:
        """Future times (as offsets from ``now``) where the allowance's slope changes or jumps.

        The span stops being one sample (a fresh follower-side sensor), then the oldest sample
        is purged every sample; a window later every retained sample holds the current rate
        and the sawtooth repeats itself, so the purges of the next window and a bit are enough.

        :param limit: only the first ``limit`` are read, and whether there are more: the list may stop
            after ``limit + 1`` (a walk of a few breaks, at every re-plan, listed a window of purges)
        """
        ms, w = self.min_span, self.window
        origin, k, purges = self._purge_grid(now)
        out: list[float] = []
        # the purges increase with i: the first ``limit + 1`` ahead are the smallest
        wanted = purges if limit is None else limit + 1
        for i in range(purges):
            x = origin + w + (k + i) * ms - now
            if x > 1e-12:
                out.append(x)
                if len(out) == wanted:
                    break
        if not self.aged:
            x = origin + ms - now
            if x > 1e-12:
                out.append(x)
                out.sort()
        return out

    def seconds_to_cross(self, bound: float, level: float = 0.0, breaks: int | None = None) -> float:
        """Seconds until the allowance, moving at the current rate, reaches ``level`` (inf if never).

        :param bound: the quota in bytes/s
        :param level: allowance in bytes to reach
        :param breaks: look no further than this many breaks ahead: not crossed by then, the answer
            is the last break looked at, a time to ask again (None: as far as it takes)
        """
        if self.t is None:
            return math.inf if self.rate <= 0 or bound * self.min_span <= level else \
                (bound * self.min_span - level) / self.rate
        if self._past_first_window() and self._never_crosses(bound, level):
            return math.inf
        return self._walk_to_cross(bound, level, breaks)

    def _past_first_window(self) -> bool:
        """Whether the span is at least the window from now on, while the course holds.

        Always for an aged meter. A follower-side one gets there a window after its first
        record, and stays there: it starts fresh again only once it records nothing and its
        window is empty, which changes its course (and so asks again).
        """
        if self.aged:
            return True
        return self.first is not None and self.t is not None and self.t - self.first >= self.window

    def _never_crosses(self, bound: float, level: float) -> bool:
        """Whether a floor under an open meter's allowance from now on, at the current rate,
        stays above ``level``; asked once its span is at least the window (:meth:`_past_first_window`).

        A span is at least the window and at most the longest span, so it starts no earlier
        than the longest span before its end: what it counts is at most, over the starts
        ``s`` from then to now, the bytes recorded from ``s`` to now plus what the current rate
        adds in the rest of a longest span. That is linear between the recorded breakpoints,
        so its largest value is at one of them or at an end. Most quotas stay open on their
        course, and this answers "never" for them without walking the purges: the receivers'
        follower quotas of a large move, and the senders' leader quotas below their bound (a
        floor that added the longest span's history to a longest span at the current rate, the
        two ends at once, missed every quota recording more than half its bound).

        :param bound: the quota in bytes/s
        :param level: allowance in bytes
        """
        now = self.t
        assert now is not None
        # _tail's rounding (1e-9 of a sample) and a left look (1e-6 s) move a span's start a
        # hair: widen the span by more than both, so the floor stays under every walked value
        longest = self.window + self.min_span + _SLACK_S
        start = now - longest
        room = bound * (self.window - _SLACK_S) - level - _EPS_BYTES
        ts, cs, rate = self.ts, self.cs, self.rate
        c_now = cs[-1] + rate * (now - ts[-1])
        held, added = c_now - self._cum(start, left=True), rate * longest  # the two ends
        if held + added < room:
            return True  # both ends at once: no need to look between them
        if held >= room or added >= room:
            return False
        for t, c in zip(ts, cs):
            if t > start and c_now - c + rate * (t - start) >= room:
                return False
        return True

    def _walk_to_cross(self, bound: float, level: float, breaks: int | None = None) -> float:
        """seconds_to_cross of an open meter, from break to break (``breaks``: at most that many)."""
        now = self.t
        assert now is not None
        tails: dict[float, float] = {}
        # every time walked is at or after now, past the last breakpoint
        ahead = self._allowance_at
        side = ahead(bound, now, False, tails) - level
        if side == 0:
            return math.inf
        d0, a0 = 0.0, side
        # linear between breaks (the span's start stays put), jumps at breaks (samples purged);
        # after the last break the sawtooth repeats what the last sample did
        ahead_breaks = self._breaks(now, breaks)
        cut = breaks is not None and breaks < len(ahead_breaks)  # more breaks than walked: ask again
        if cut:
            ahead_breaks = ahead_breaks[:breaks]
        for d1 in ahead_breaks:
            if d0:  # at d0 = 0 the allowance is the one just found
                a0 = ahead(bound, now + d0, False, tails) - level
                if d0 > 1e-9 and (a0 > 0) != (side > 0):
                    return d0
            a1 = ahead(bound, now + d1, True, tails) - level
            if a1 == 0 or (a1 > 0) != (side > 0):
                return d0 + (d1 - d0) * a0 / (a0 - a1) if a0 != a1 else d1
            d0 = d1
        if d0 > 1e-9 and ((ahead(bound, now + d0, False, tails) - level > 0) != (side > 0)):
            return d0
        return d0 if cut else math.inf

    def cross_at(self, now: float, bound: float, level: float, breaks: int | None = None) -> float:
        """Time the allowance reaches ``level``: ``seconds_to_cross`` in absolute time, with a
        "never" kept while the meter's course, the bound and the level stay the same.

        Most open quotas never cross on their course, and the walk that finds that out (over
        a window of sample purges, for every quota at every re-plan) was the rehearsal's hot
        spot. Finite crossings are computed afresh every time: the walk started at a later
        time lands on the same crossing only up to rounding, and the fluid model's event
        order (then the executor's choices) can turn on that last bit. A "never" is not kept
        while a lump is in the window: there the walk's window tail can land an ulp past the
        lump and count it gone a break early, so an answer depends on when the walk starts.

        :param now: simulated seconds (the meter's time once it records)
        :param bound: the quota in bytes/s
        :param level: allowance in bytes to reach
        :param breaks: as :meth:`seconds_to_cross`
        """
        if self.t is None:
            return now + self.seconds_to_cross(bound, level)
        if self._never == (self.version, bound, level) and self._lump_at < self.ts[0]:
            return math.inf
        seconds = self.seconds_to_cross(bound, level, breaks)
        self._never = (self.version, bound, level) if math.isinf(seconds) else None
        return self.t + seconds

    def break_at(self, now: float) -> float:
        """Time of the allowance's next slope change: ``next_break`` in absolute time, kept
        until the meter's course changes or the break is reached.

        The breaks are sample purges, fixed points in time, so a quota at its bound whose
        recording rate a re-plan did not change costs nothing.
        (Crossings are not kept that way: recomputed later, the walk can land a window's tail
        an ulp the other side of a lump and answer differently, so keeping one would change
        the model's event times; :meth:`cross_at` keeps only "never".)

        :param now: simulated seconds (the meter's time once it records)
        """
        if self.t is None:
            return now + self.next_break()
        cached = self._break
        if cached is not None and cached[0] == self.version and cached[1] - self.t > 1e-12:  # as _breaks
            return cached[1]
        at = self.t + self.next_break()
        self._break = (self.version, at)
        return at
