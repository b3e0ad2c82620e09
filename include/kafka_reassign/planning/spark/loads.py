"""Per-broker loads (driver, brokers-sized): before from the engine's aggregate, after from the
changed partitions only (before + what each change adds and removes)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from kafka_reassign.cluster.consumers import CONSUMER_BYTES
from kafka_reassign.planning.spark.targets import BrokerInfo


@dataclass
class Loads:
    """Per broker: bytes, replicas, preferred leaders, the produce rate it leads (``bytes_in``:
    Cruise Control's leader bytes in) and the produce rate it receives as leader or follower
    (``net_in``: network in); the produce rate it sends to the followers of the partitions it leads
    (``rep_out``: the replication part of network out, :func:`network_out`); bytes per log dir;
    replicas per (topic, broker) of the movable topics (``topic_count``: the topic-spread goal's);
    of the partitions it leads whose consumers the snapshot measured (``consumer_bytes_per_sec``),
    the bytes consumers read (``consumed``) and their produce rate (``measured_in``)."""

    bytes: dict[int, float]
    count: dict[int, int]
    leaders: dict[int, int]
    bytes_in: dict[int, float]
    dir_bytes: dict[tuple[int, str], float] = field(default_factory=dict)
    net_in: dict[int, float] = field(default_factory=dict)
    topic_count: dict[tuple[str, int], int] = field(default_factory=dict)
    rep_out: dict[int, float] = field(default_factory=dict)
    consumed: dict[int, float] = field(default_factory=dict)
    measured_in: dict[int, float] = field(default_factory=dict)

    def copy(self) -> "Loads":
        return Loads(dict(self.bytes), dict(self.count), dict(self.leaders), dict(self.bytes_in),
                     dict(self.dir_bytes), dict(self.net_in), dict(self.topic_count), dict(self.rep_out),
                     dict(self.consumed), dict(self.measured_in))


def leader_out(replication: float, rate: float, fanout: float, consumed: float = 0.0, measured: float = 0.0) -> float:
    """What a leader sends (Cruise Control's network outbound): ``replication`` to its followers,
    the ``consumed`` bytes the snapshot measured, and ``fanout`` consumer groups reading the rest of
    the produce rate it leads (``rate - measured``: the param stands in where nothing was measured).
    Linear, so it is the figure of one partition and of a broker's sums alike.

    :param fanout: consumer groups reading each partition (the ``consumer_fanout`` param)
    """
    return replication + consumed + fanout * (rate - measured)


def network_out(loads: Loads, fanout: float) -> dict[int, float]:
    """Each broker's network out (:func:`leader_out` of what it leads).

    :param fanout: consumer groups reading each partition (the ``consumer_fanout`` param)
    """
    return {b: leader_out(loads.rep_out.get(b, 0.0), loads.bytes_in.get(b, 0.0), fanout,
                          loads.consumed.get(b, 0.0), loads.measured_in.get(b, 0.0)) for b in loads.bytes}


def broker_infos(header: dict[str, Any]) -> tuple[dict[int, BrokerInfo], dict[int, list[tuple[str, float]]]]:
    """Brokers of a snapshot header, and each broker's log dirs (path, capacity)."""
    infos: dict[int, BrokerInfo] = {}
    dirs: dict[int, list[tuple[str, float]]] = {}
    for b in header["brokers"]:
        bid = int(b["id"])
        dirs[bid] = [(str(d["path"]), float(d["capacity_bytes"])) for d in b["log_dirs"]]
        rack = b.get("rack")
        infos[bid] = BrokerInfo(bid, rack if rack is not None else f"__no_rack_{bid}",
                                sum(c for _, c in dirs[bid]), b.get("alive", True) is not False,
                                bool(b["log_dirs"]) and all(d.get("cordoned") is True for d in b["log_dirs"]))
    return infos, dirs


def open_log_dirs(header: dict[str, Any]) -> dict[int, list[tuple[str, float]]]:
    """Each broker's log dirs that are not cordoned (KIP-1066): where a new replica may be put.
    A broker with one open dir left gets "any" for new replicas, and Kafka itself avoids the others."""
    out: dict[int, list[tuple[str, float]]] = {}
    for b in header["brokers"]:
        out[int(b["id"])] = [(str(d["path"]), float(d["capacity_bytes"])) for d in b["log_dirs"]
                             if d.get("cordoned") is not True]
    return out


def loads_from_frame(per: Any, dirs: dict[int, list[tuple[str, float]]]) -> Loads:
    """Loads from the engine's (broker, log_dir) aggregate; unnamed dirs count on the first dir."""
    out = Loads({b: 0.0 for b in dirs}, {b: 0 for b in dirs}, {b: 0 for b in dirs},
                {b: 0.0 for b in dirs}, {(b, p): 0.0 for b, ds in dirs.items() for p, _ in ds},
                {b: 0.0 for b in dirs}, rep_out={b: 0.0 for b in dirs}, consumed={b: 0.0 for b in dirs},
                measured_in={b: 0.0 for b in dirs})
    for b, d, by, n, ld, bi, ni, ro, co, mi in zip(per["broker"], per["log_dir"], per["bytes"], per["replicas"],
                                                   per["leaders"], per["bytes_in"], per["net_in"], per["rep_out"],
                                                   per["consumed"], per["measured_in"]):
        b = int(b)
        out.bytes[b] += float(by)
        out.count[b] += int(n)
        out.leaders[b] += int(ld)
        out.bytes_in[b] += float(bi or 0.0)
        out.net_in[b] += float(ni or 0.0)
        out.rep_out[b] += float(ro or 0.0)
        out.consumed[b] += float(co or 0.0)
        out.measured_in[b] += float(mi or 0.0)
        key = (b, d) if (b, d) in out.dir_bytes else (b, dirs[b][0][0])
        out.dir_bytes[key] += float(by)
    return out


def topic_counts_from_frame(frame: Any) -> dict[tuple[str, int], int]:
    """(topic, broker) -> replicas from the engine's ``topic_counts`` frame."""
    # whole columns to lists first: iterating Arrow-backed columns costs a call per element
    return {(str(t), int(b)): int(n) for t, b, n in zip(frame["topic"].tolist(), frame["broker"].tolist(),
                                                       frame["replicas"].tolist())}


def _flat(values: list[Any]) -> tuple[Any, Any]:
    """(row, element) of every element of a column of int lists, rows without a list empty: pandas'
    ``explode`` + ``dropna`` in its order, without its object column (moves-sized frames)."""
    import numpy as np

    lists = [v if hasattr(v, "__len__") else () for v in values]
    lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(lens.sum()))
    return np.repeat(np.arange(len(lists)), lens), flat


def _topic_after(after: Loads, frame: Any, flats: list[tuple[Any, Any]]) -> None:
    """Apply the changes' added / removed replicas to ``after.topic_count`` (movable topics only).

    :param flats: (row, broker) of the added replicas, then of the removed ones (:func:`_flat`)
    """
    topics = [str(t) for t in frame["topic"].tolist()]
    for (rows, brokers), sign in zip(flats, (1, -1)):
        for key, n in Counter(zip(map(topics.__getitem__, rows.tolist()), brokers.tolist())).items():
            after.topic_count[key] = after.topic_count.get(key, 0) + sign * n


def loads_after(before: Loads, changes: Any) -> Loads:
    """``before`` with every changed partition applied (bytes, replica counts, leaders), from
    the ``added`` / ``removed`` columns the leader tasks computed (vectorised: moves-sized)."""
    import pandas as pd

    after = before.copy()
    rates = changes["bytes_in_per_sec"].fillna(0.0) if "bytes_in_per_sec" in changes else 0.0
    frame = changes.assign(rate=rates)
    flats = [_flat(frame[col].tolist()) for col in ("added", "removed")]
    for (rows, brokers), sign in zip(flats, (1, -1)):
        if len(rows):  # pandas' sums, over explode's rows in explode's order: the same figures
            x = pd.DataFrame({"b": brokers, "size_bytes": frame["size_bytes"].to_numpy()[rows],
                              "rate": frame["rate"].to_numpy()[rows]})
            g = x.groupby("b").agg(total=("size_bytes", "sum"), n=("size_bytes", "count"), rate=("rate", "sum"))
            for b, total, n, rate in zip(g.index, g["total"], g["n"], g["rate"]):
                after.bytes[int(b)] += sign * float(total)
                after.count[int(b)] += sign * int(n)
                after.net_in[int(b)] = after.net_in.get(int(b), 0.0) + sign * float(rate)
    if before.topic_count:
        _topic_after(after, frame, flats)
    old, new = (pd.Series([v[0] if hasattr(v, "__len__") and len(v) else None for v in frame[col].tolist()],
                          index=frame.index, dtype="Int64") for col in ("orig", "final"))
    moved = old != new
    for leaders, sign in ((old[moved], -1), (new[moved], 1)):
        g = frame.loc[moved, "rate"].groupby(leaders).agg(["count", "sum"])  # NA leaders dropped
        for b, n, rate in zip(g.index, g["count"], g["sum"]):
            after.leaders[int(b)] += sign * int(n)
            after.bytes_in[int(b)] = after.bytes_in.get(int(b), 0.0) + sign * float(rate)
    changed = frame.loc[moved]
    read = changed[CONSUMER_BYTES] if CONSUMER_BYTES in changed else changed["rate"] * float("nan")
    for leaders, col, sign in ((old[moved], "orig", -1), (new[moved], "final", 1)):
        sent = changed["rate"] * (changed[col].str.len() - 1)  # the leader sends to each follower
        for part, figure in ((after.rep_out, sent), (after.consumed, read.fillna(0.0)),
                             (after.measured_in, changed["rate"].where(read.notna(), 0.0))):
            for b, rate in figure.groupby(leaders).sum().items():
                part[int(b)] = part.get(int(b), 0.0) + sign * float(rate)
    return after
