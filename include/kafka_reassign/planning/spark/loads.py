"""Per-broker loads (driver, brokers-sized): before from the engine's aggregate, after from the
changed partitions only (before + what each change adds and removes)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_reassign.planning.spark.targets import BrokerInfo


@dataclass
class Loads:
    """Bytes, replicas, preferred leaders and led produce rate per broker; bytes per log dir."""

    bytes: dict[int, float]
    count: dict[int, int]
    leaders: dict[int, int]
    bytes_in: dict[int, float]
    dir_bytes: dict[tuple[int, str], float] = field(default_factory=dict)

    def copy(self) -> "Loads":
        return Loads(dict(self.bytes), dict(self.count), dict(self.leaders), dict(self.bytes_in),
                     dict(self.dir_bytes))


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
                {b: 0.0 for b in dirs}, {(b, p): 0.0 for b, ds in dirs.items() for p, _ in ds})
    for b, d, by, n, ld, bi in zip(per["broker"], per["log_dir"], per["bytes"], per["replicas"],
                                   per["leaders"], per["bytes_in"]):
        b = int(b)
        out.bytes[b] += float(by)
        out.count[b] += int(n)
        out.leaders[b] += int(ld)
        out.bytes_in[b] += float(bi or 0.0)
        key = (b, d) if (b, d) in out.dir_bytes else (b, dirs[b][0][0])
        out.dir_bytes[key] += float(by)
    return out


def loads_after(before: Loads, changes: Any) -> Loads:
    """``before`` with every changed partition applied (bytes, replica counts, leaders), from
    the ``added`` / ``removed`` columns the leader tasks computed (vectorised: moves-sized)."""
    after = before.copy()
    for col, sign in (("added", 1), ("removed", -1)):
        x = changes[[col, "size_bytes"]].explode(col).dropna(subset=[col])
        if len(x):
            g = x.groupby(x[col].astype(int))["size_bytes"].agg(["sum", "count"])
            for b, total, n in zip(g.index, g["sum"], g["count"]):
                after.bytes[int(b)] += sign * float(total)
                after.count[int(b)] += sign * int(n)
    old = changes["orig"].str[0].astype("Int64")
    new = changes["final"].str[0].astype("Int64")
    moved = old != new
    for b, n in old[moved].value_counts().items():
        after.leaders[int(b)] -= int(n)
    for b, n in new[moved].value_counts().items():
        after.leaders[int(b)] += int(n)
    return after
