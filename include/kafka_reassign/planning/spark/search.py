"""The move search of one broker group (a rack, or a piece of one), run as a Spark task (``applyInPandas``).

Each group gets the replicas on its over-loaded brokers (``sources``, bytes to shed each) and
byte quotas on under-loaded brokers: its own rack's (``local``) and slices of other racks'
(``exports``, computed on the driver so that the racks' quotas add up). Groups never compete for
the same quota and never both move replicas of one partition into the same rack, so they run
independently and the driver only concatenates their moves:

* an in-rack move keeps every partition's set of racks as it is;
* a cross-rack move goes only into a rack the partition does not use (with fewer racks than
  replicas all brokers form one group, see :func:`targets.search_groups`), and for each
  (partition, receiving rack) only one of the partition's racks may send: the *owner*, drawn from
  ``crc32(topic-partition)`` with weights = the bytes each of its racks exports to that rack.
  Every group computes the same owner from the same flows, so two groups never put two
  replicas of one partition into one rack, and exporters get candidates in proportion to
  what they must send. The leader stage still checks each partition's moves together.

A group may be cut into pieces, each its own task (:mod:`.pieces`): they split the group's
sources and quotas, and a partition with replicas in two pieces is moved by one of them only.

Per source, candidates are taken largest first while they fit the bytes still to shed plus a
small slack (first-fit decreasing); each goes to the receiver with most quota left that passes
the rules. The many small replicas of a lognormal size distribution then close the gap, so the
bytes moved stay within about a percent of the bytes above the target.

With the topic-spread goal listed (``SearchInputs.spread``), a source first sheds, of each topic
crowded on it (above even + slack), as many of its smallest replicas as it holds above that (the
set the goal's lower bound counts), smallest first while they fit the bytes it sheds; then it
takes instead of the byte pick a replica of a still-crowded topic when one is within
:data:`SPREAD_SIZE_MATCH` of the pick's size, and a replica goes first to a receiver below its
topic's even share (among the top :data:`SPREAD_RECEIVER_SCAN` by quota): the copies the disk goal
makes anyway then also spread topics, and the spread pass (:mod:`.spread`) has less left to copy.
The quotas are unchanged, so the disk result is too; without the goal the search is byte for byte
what it was. (When the crowded replicas are hot and the network-in pass cannot then bring every
broker under its limit, the driver searches again without shedding them first:
:func:`.flow.search_and_network`.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_reassign.planning.spark.spread import EvenShares

#: share of the balance tolerance a receiver may go above its quota for a replica nothing else fits
RECEIVER_GIVE = 0.4
#: topic-spread listed: a replica of a topic crowded on its source replaces the search's pick when
#: their sizes differ by at most this share of the larger (the bytes shed stay about the same)
SPREAD_SIZE_MATCH = 0.25
#: topic-spread listed: receivers per group (most quota first) looked at for one below the topic's
#: even share before the plain rule; bounded so that a topic at even everywhere costs a few dozen
#: heap pops, not every receiver (12 left hot-traffic 120k at spread 12, 48 reaches 0)
SPREAD_RECEIVER_SCAN = 48
# the produce rate and the replicas travel along for the network-in pass on the driver (:mod:`.network`)
MOVE_COLUMNS = ("topic", "partition", "pos", "src", "dst", "size_bytes", "bytes_in_per_sec", "replicas")
MOVE_SCHEMA = ("topic string, partition int, pos int, src int, dst int, size_bytes double, "
               "bytes_in_per_sec double, replicas array<int>")


@dataclass
class GroupQuotas:
    """What one group may do.

    :param sources: broker -> bytes to shed (drained brokers: all they hold)
    :param drained: brokers that must end empty (every replica moves)
    :param local: in-group receiver -> bytes it may take
    :param exports: receiver in another group -> bytes it may take from this group
    :param slack: source -> bytes above its target at which it stops shedding
    :param give: broker -> bytes a receiver may go above its quota, or a source below its
        target, for one replica that fits nothing else (balance_tolerance x target)
    :param hard_limit: receiver -> bytes it may never exceed (capacity x ceiling - current)
    :param count_excess: source -> replicas it holds above its share of the replica count
    """

    sources: dict[int, float]
    drained: set[int] = field(default_factory=set)
    local: dict[int, float] = field(default_factory=dict)
    exports: dict[int, float] = field(default_factory=dict)
    slack: dict[int, float] = field(default_factory=dict)
    give: dict[int, float] = field(default_factory=dict)
    hard_limit: dict[int, float] = field(default_factory=dict)
    count_excess: dict[int, float] = field(default_factory=dict)


@dataclass
class SpreadHint:
    """What the search needs to pick moves that also spread topics (goal topic-spread listed).

    :param even: each topic's even share per broker (:class:`.spread.EvenShares`)
    :param count: (topic, receiver) -> replicas of the topic there; each task counts its own
        placements on its copy as it makes them (tasks of other pieces do not see them)
    :param crowded: source -> topic -> its replicas there above even + topic_spread_slack
    """

    even: EvenShares
    count: dict[tuple[str, int], int]
    crowded: dict[int, dict[str, int]]
    #: a source sheds its crowded topics' excess before any other replica (:meth:`_Crowded.first`)
    first: bool = True


@dataclass
class SearchInputs:
    """Everything the group tasks need: small (brokers), pickled into each task."""

    quotas: dict[str, GroupQuotas]
    rack: dict[int, str]
    group: dict[int, str]
    flows: dict[str, dict[str, float]] = field(default_factory=dict)
    #: source -> its piece of the group (:mod:`.pieces`), when groups are cut into pieces
    piece: dict[int, str] = field(default_factory=dict)
    #: topic-spread listed: prefer crowded topics' replicas and receivers below even (None: bytes only)
    spread: SpreadHint | None = None

    def holds(self, brokers: list[int], src: int) -> bool:
        """Whether ``src``'s piece may move the partition on ``brokers``: the piece of its
        first replica on a source of ``src``'s group (pieces of one group never both move it)."""
        me = self.group[src]
        for b in brokers:
            if b in self.piece and self.group[b] == me:
                return self.piece[b] == self.piece.get(src)
        return True

    def owner(self, groups: list[str], crc: int, into: str) -> str | None:
        """The group allowed to move a replica of the partition (in ``groups``) into ``into``."""
        weights = [(g, self.flows.get(g, {}).get(into, 0.0)) for g in sorted(set(groups))]
        total = sum(w for _, w in weights)
        if total <= 0:
            return None
        x = (crc % 1_000_003) / 1_000_003 * total
        for g, w in weights:
            if x < w:
                return g
            x -= w
        return weights[-1][0]


class _Receivers:
    """Receivers of one pool (in-rack or exports) by group, each group a max-heap on quota left.

    Lookups pop from the top until a receiver passes the row's rules, then push the popped
    back: the first few receivers nearly always pass, so a lookup costs a few heap operations
    instead of a scan of every receiver. Entries whose quota changed since are skipped.
    """

    def __init__(self, room: dict[int, float], over: dict[int, float], group: dict[int, str]) -> None:
        import heapq

        self.room, self.over, self.group = room, over, group
        self.heaps: dict[str, list[tuple[float, int]]] = {}
        self.max_over: dict[str, float] = {}
        for b, r in room.items():
            g = group[b]
            self.heaps.setdefault(g, []).append((-r, b))
            self.max_over[g] = max(self.max_over.get(g, 0.0), over.get(b, 0.0))
        for h in self.heaps.values():
            heapq.heapify(h)

    def take(self, b: int, size: float) -> None:
        import heapq

        self.room[b] -= size
        heapq.heappush(self.heaps[self.group[b]], (-self.room[b], b))

    def best(self, g: str, size: float, ok: Any, forced: bool, scan: int = 0) -> tuple[float, int] | None:
        """(quota left, broker) of the receiver of group ``g`` with most quota that fits and passes ``ok``.

        :param scan: when > 0, give up after looking at that many receivers
        """
        import heapq

        h = self.heaps.get(g, [])
        popped: list[tuple[float, int]] = []
        found = None
        while h:
            neg, b = h[0]
            if -neg != self.room[b]:
                heapq.heappop(h)  # stale: a newer entry carries this receiver's quota
                continue
            if not forced and -neg + self.max_over[g] < size:
                break
            if scan and len(popped) >= scan:
                break
            popped.append(heapq.heappop(h))
            if (forced or -neg + self.over.get(b, 0.0) >= size) and ok(b):
                found = (-neg, b)
                break
        for e in popped:
            heapq.heappush(h, e)
        return found


def _dest(row_brokers: list[int], pos: int, crc: int, size: float, q: GroupQuotas,
          inp: SearchInputs, used: set[int], forced: bool, pools: tuple[_Receivers, _Receivers],
          topic: str = "") -> tuple[_Receivers, int] | None:
    """(pool, receiver) for one replica, or None: in-rack first, then the groups this one owns
    the partition's move into; with topic-spread listed, first among the top receivers below
    the topic's even share."""
    src = row_brokers[pos]
    taken = set(row_brokers) | used
    others_racks = {inp.rack[b] for i, b in enumerate(row_brokers) if i != pos}
    keep_racks = len(others_racks | {inp.rack[src]})

    def ok(b: int) -> bool:
        return (b not in taken and q.hard_limit.get(b, float("inf")) >= size
                and len(others_racks | {inp.rack[b]}) >= keep_racks)

    hint = inp.spread
    if hint is not None and topic in hint.even:
        even = hint.even

        def below(b: int) -> bool:
            return hint.count.get((topic, b), 0) < even.of(topic, b) and ok(b)

        hit = _pick(row_brokers, src, crc, size, inp, forced, pools, below, SPREAD_RECEIVER_SCAN)
        if hit is not None:
            return hit
    return _pick(row_brokers, src, crc, size, inp, forced, pools, ok, 0)


def _pick(row_brokers: list[int], src: int, crc: int, size: float, inp: SearchInputs, forced: bool,
          pools: tuple[_Receivers, _Receivers], ok: Any, scan: int) -> tuple[_Receivers, int] | None:
    """The receiver with most quota left that passes ``ok``: in-rack first, then exports.

    :param scan: receivers looked at per group (0: all)
    """
    me = inp.group[src]
    groups = [inp.group[b] for b in row_brokers]
    local, exports = pools
    best = None
    for g in local.heaps:
        hit = local.best(g, size, ok, forced, scan)
        if hit and (best is None or hit[0] > best[0][0]):
            best = (hit, local)
    if best is not None and not forced:
        return best[1], best[0][1]
    for g in exports.heaps:
        if g in groups or inp.owner(groups, crc, g) != me:  # only into groups it does not use
            continue
        hit = exports.best(g, size, ok, forced, scan)
        if hit and (best is None or hit[0] > best[0][0]):
            best = (hit, exports)
    return (best[1], best[0][1]) if best else None


class _Pool:
    """One source's candidates sorted by size, with O(log n) "nearest untried size" lookups."""

    def __init__(self, sizes: list[float]) -> None:
        self.sizes = sizes
        self.right = list(range(len(sizes) + 1))   # next untried index >= i (len = none)
        self.left = list(range(len(sizes) + 1))    # slot j = index j - 1; slot 0 = none

    def _find(self, arr: list[int], i: int) -> int:
        root = i
        while arr[root] != root:
            root = arr[root]
        while arr[i] != root:
            arr[i], i = root, arr[i]
        return root

    def take(self, i: int) -> None:
        self.right[i] = i + 1
        self.left[i + 1] = i

    def nearest(self, want: float, most: float) -> int | None:
        """Index of the untried candidate closest to ``want`` among those <= ``most``."""
        from bisect import bisect_right

        cut = bisect_right(self.sizes, most)
        k = bisect_right(self.sizes, want, 0, cut)
        below = self._find(self.left, k) - 1        # largest untried index < k
        above = self._find(self.right, k)           # smallest untried index >= k
        hi = above if above < cut else None
        lo = below if below >= 0 else None
        if lo is None or (hi is not None and self.sizes[hi] - want < want - self.sizes[lo]):
            return hi
        return lo


class _Crowded:
    """A source's candidates of topics crowded on it (goal topic-spread listed), as a second
    :class:`_Pool`, and how many of each topic it still holds above even + slack.

    :param rows: the source's candidates, by size ascending (``rows[i][0]`` is the topic)
    :param excess: topic -> replicas above even + slack on the source
    """

    def __init__(self, rows: list[tuple], excess: dict[str, int]) -> None:
        self.excess = dict(excess)
        self.index = [i for i, r in enumerate(rows) if r[0] in self.excess]
        self.slot = {i: k for k, i in enumerate(self.index)}
        self.pool = _Pool([float(rows[i][3]) for i in self.index])

    def take(self, i: int) -> None:
        if i in self.slot:
            self.pool.take(self.slot[i])

    def prefer(self, i: int, rows: list[tuple], want: float, most: float) -> int:
        """``i``, or the crowded candidate nearest ``want`` when about ``i``'s size (the first
        of a topic no longer crowded are dropped on the way)."""
        size = float(rows[i][3])
        while True:
            k = self.pool.nearest(want, most)
            if k is None:
                return i
            j = self.index[k]
            if self.excess[rows[j][0]] <= 0:
                self.pool.take(k)
                continue
            other = float(rows[j][3])
            return j if abs(other - size) <= SPREAD_SIZE_MATCH * max(other, size) else i

    def moved(self, topic: str) -> None:
        if topic in self.excess:
            self.excess[topic] -= 1

    def first(self, rows: list[tuple], budget: float) -> list[int]:
        """The replicas the source sheds before any other: of each crowded topic its excess
        count of smallest ones (the set the topic-spread term of the lower bound counts), smallest
        first over all topics while their bytes add up to at most ``budget`` (most replicas for
        the bytes; what does not fit is left to the spread pass).

        :param budget: bytes the source sheds for the disk goal
        """
        left = dict(self.excess)
        out: list[int] = []
        for i in self.index:  # size ascending
            if left[rows[i][0]] > 0:
                left[rows[i][0]] -= 1
                out.append(i)
        total = 0.0
        for cut, i in enumerate(out):
            total += float(rows[i][3])
            if total > budget:
                return out[:cut]
        return out


def search_group(pdf: Any, inp: SearchInputs) -> Any:
    """Moves for one group's candidate replicas (pandas in, pandas out).

    Each source sheds its bytes with replicas of about ``bytes left / replicas left to shed`` in
    size, so its byte excess and its replica-count excess come down together (a source with few
    surplus replicas sheds few big ones, one with many sheds many small ones); a drained broker
    sends everything, largest first.

    :param pdf: columns grp, topic, partition, pos, broker, size_bytes, replicas, crc, bytes_in_per_sec
    """
    import pandas as pd

    if len(pdf) == 0:
        return pd.DataFrame({c: [] for c in MOVE_COLUMNS})
    q = inp.quotas[str(pdf["grp"].iloc[0])]
    q = GroupQuotas(q.sources, q.drained, dict(q.local), dict(q.exports), q.slack, q.give,
                    dict(q.hard_limit), q.count_excess)  # a task's own copy
    if inp.spread is not None:  # the task counts its own moves onto receivers
        h = inp.spread
        inp = SearchInputs(inp.quotas, inp.rack, inp.group, inp.flows, inp.piece,
                           SpreadHint(h.even, dict(h.count), h.crowded, h.first))
    # only a receiver's own rack may push it past its quota (once, not once per group)
    pools = (_Receivers(q.local, {b: RECEIVER_GIVE * q.give.get(b, 0.0) for b in q.local}, inp.group),
             _Receivers(q.exports, {b: q.slack.get(b, 0.0) for b in q.exports}, inp.group))
    pdf = pdf.sort_values(["broker", "size_bytes", "topic", "partition"], kind="mergesort")
    moved: dict[tuple[str, int], set[int]] = {}
    out: list[tuple] = []
    by_broker = {int(b): g for b, g in pdf.groupby("broker", sort=True)}
    for src in sorted(q.sources, key=lambda b: (-q.sources[b], b)):
        g = by_broker.get(src)
        if g is not None:
            rows = list(zip(g["topic"], g["partition"], g["pos"], g["size_bytes"], g["replicas"], g["crc"],
                            g["bytes_in_per_sec"]))
            out += _shed(src, rows, q, inp, moved, pools)
    return pd.DataFrame(out, columns=list(MOVE_COLUMNS))


def _shed(src: int, rows: list[tuple], q: GroupQuotas, inp: SearchInputs,
          moved: dict[tuple[str, int], set[int]], pools: tuple[_Receivers, _Receivers]) -> list[tuple]:
    """One source's moves; ``rows`` sorted by size ascending."""
    forced = src in q.drained
    left, slack = q.sources[src], q.slack.get(src, 0.0)
    count_left = q.count_excess.get(src, 0.0)
    pool = _Pool([float(r[3]) for r in rows])
    hint = inp.spread
    crowd = _Crowded(rows, hint.crowded[src]) if hint is not None and hint.crowded.get(src) else None
    out: list[tuple] = []
    order = iter(range(len(rows) - 1, -1, -1))
    shed_first = crowd is not None and hint is not None and hint.first and not forced
    first = iter(crowd.first(rows, left) if crowd is not None and shed_first else ())
    while True:
        i = next(first, None)
        if i is not None or forced:
            i = i if i is not None else next(order, None)
        elif left <= slack:
            break
        else:
            want, most = left / max(1.0, count_left), left + max(slack, q.give.get(src, 0.0))
            i = pool.nearest(want, most)
            if crowd is not None and i is not None:
                i = crowd.prefer(i, rows, want, most)
        if i is None:
            break
        pool.take(i)
        if crowd is not None:
            crowd.take(i)
        topic, part, pos, size, reps, crc, rate = rows[i]
        key, pos, size = (topic, int(part)), int(pos), float(size)
        used = moved.setdefault(key, set())
        if -1 - pos in used:
            continue
        reps = [int(x) for x in reps]
        if not inp.holds(reps, src):
            continue
        hit = _dest(reps, pos, int(crc), size, q, inp, used, forced, pools, str(topic))
        if hit is None:
            continue
        receivers, dst = hit
        receivers.take(dst, size)
        q.hard_limit[dst] = q.hard_limit.get(dst, float("inf")) - size
        used.update((dst, -1 - pos))  # the receiver, and the position (moved once)
        left -= size
        count_left -= 1
        if hint is not None:
            hint.count[(str(topic), dst)] = hint.count.get((str(topic), dst), 0) + 1
        if crowd is not None:
            crowd.moved(str(topic))
        out.append((topic, int(part), pos, src, dst, size, float(rate), reps))
    return out
