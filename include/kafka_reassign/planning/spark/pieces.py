"""Cutting each search group (a rack) into pieces, so the search runs as more Spark tasks than
there are racks.

A group's sources are split between its pieces by bytes to shed (largest first, each to the
piece with the least so far), and each of the group's receiver pools (in-rack, and each other
rack's import slice) is cut in the same proportions: a piece gets whole receivers except where a
cut falls inside one, whose quota (and its allowance above it) is split. So each piece's quotas
match its sources' bytes, no quota byte is given twice, and a replica can only be moved by the
piece holding its broker. Between pieces the rules of :mod:`.search` hold as between racks: the
owner of a cross-rack move is drawn per rack (``SearchInputs.group`` stays the rack), and a
partition with replicas on sources of two pieces of one rack is moved only by the piece of the
first of them (``SearchInputs.piece``), so two pieces never move replicas of one partition.

The number of pieces follows the problem (about :data:`PIECE_REPLICAS` candidate replicas each),
never the Spark cluster's cores, so the same snapshot gives the same plan on ``local[2]`` and on
any cluster; a cluster with more cores than pieces can lower ``search_piece_replicas``.
"""
from __future__ import annotations

from kafka_reassign.planning.spark.search import GroupQuotas

#: candidate replicas per search piece (about 2-4 s of one core each): 1.5M replicas on 4 racks
#: make about 20 pieces, more tasks than a small cluster has cores
PIECE_REPLICAS = 40_000
#: separates a group's name from its piece number ("rack-a#2")
PIECE_MARK = "#"


def piece_count(q: GroupQuotas, counts: dict[int, int], per_piece: int) -> int:
    """Pieces for one group: its candidates / ``per_piece``, at most one per source and per
    receiver (a piece without a receiver could only push its sources' replicas over quota). A
    group with a broker to drain stays whole: a drained broker must send every replica, and
    those its racks' rules keep out of its piece's exports land in-rack, where only the whole
    group's other sources can make room (cut, remove-brokers at 120k ended disk 1.024, not 1.016).

    :param counts: replicas per broker (a source's candidates are at most all of them)
    :param per_piece: candidate replicas per piece
    """
    if q.drained:
        return 1
    work = sum(counts.get(b, 0) for b in q.sources)
    wanted = max(1, round(work / max(1, per_piece)))
    return max(1, min(wanted, len(q.sources), len(q.local) + len(q.exports)))


def _lpt(weights: dict[int, float], k: int) -> list[list[int]]:
    """Brokers into ``k`` lists, largest weight first, each to the least loaded list."""
    got = [0.0] * k
    out: list[list[int]] = [[] for _ in range(k)]
    for b in sorted(weights, key=lambda x: (-weights[x], x)):
        i = min(range(k), key=lambda p: (got[p], p))
        out[i].append(b)
        got[i] += weights[b]
    return out


def _cut(quota: dict[int, float], shares: list[float]) -> list[dict[int, float]]:
    """The receivers' quotas laid end to end (largest first) and cut at the cumulative
    ``shares``: each piece gets whole receivers but for the one straddling each cut, whose quota
    is split between two neighbouring pieces."""
    total = sum(quota.values())
    ends = [sum(shares[:i + 1]) * total for i in range(len(shares))]
    out: list[dict[int, float]] = [{} for _ in shares]
    at, p = 0.0, 0
    for b in sorted(quota, key=lambda x: (-quota[x], x)):
        left = quota[b]
        if left <= 0:  # no quota, but a drained broker's replicas may still be forced onto it
            out[p][b] = 0.0
        while left > 0:
            last = p == len(shares) - 1
            take = left if last else min(left, ends[p] - at)
            if take > 0:
                out[p][b] = take
                at += take
                left -= take
            if left > 0 and not last:
                p += 1
    return out


def split_group(name: str, q: GroupQuotas, group: dict[int, str], k: int) -> dict[str, GroupQuotas]:
    """``q`` cut into ``k`` pieces named ``name#i`` (``name`` itself when ``k`` is 1).

    :param group: broker -> search group (export quotas are cut per receiving rack)
    """
    if k <= 1:
        return {name: q}
    sources = _lpt(q.sources, k)
    shed = sum(q.sources.values()) or 1.0
    shares = [sum(q.sources[b] for b in bs) / shed for bs in sources]
    local = _cut(q.local, shares)
    exports: list[dict[int, float]] = [{} for _ in range(k)]
    for g in sorted({group[b] for b in q.exports}):
        for i, part in enumerate(_cut({b: v for b, v in q.exports.items() if group[b] == g}, shares)):
            exports[i].update(part)
    out = {}
    for i in range(k):
        out[f"{name}{PIECE_MARK}{i}"] = GroupQuotas(
            sources={b: q.sources[b] for b in sources[i]}, drained=q.drained & set(sources[i]),
            local=local[i], exports=exports[i],
            # a receiver split between pieces may go above its quota by its part of the allowance
            slack=_scaled(q.slack, exports[i], q.exports), give=_scaled(q.give, local[i], q.local),
            hard_limit={b: q.hard_limit[b] for b in list(local[i]) + list(exports[i]) if b in q.hard_limit},
            count_excess={b: q.count_excess[b] for b in sources[i] if b in q.count_excess})
    return out


def _scaled(allow: dict[int, float], part: dict[int, float], whole: dict[int, float]) -> dict[int, float]:
    """``allow`` with each receiver of ``part`` scaled by its part of its ``whole`` quota."""
    out = dict(allow)
    for b, v in part.items():
        if b in out and whole[b] > 0:
            out[b] *= v / whole[b]
    return out


def split_quotas(quotas: dict[str, GroupQuotas], counts: dict[int, int], group: dict[int, str],
                 per_piece: int = PIECE_REPLICAS) -> dict[str, GroupQuotas]:
    """Every group's pieces (see the module docstring), keyed by piece name.

    :param quotas: group -> its quotas (:func:`targets.group_quotas`)
    :param counts: replicas per broker
    :param group: broker -> search group
    :param per_piece: candidate replicas per piece
    """
    out: dict[str, GroupQuotas] = {}
    for name in sorted(quotas):
        q = quotas[name]
        out.update(split_group(name, q, group, piece_count(q, counts, per_piece)))
    return out
