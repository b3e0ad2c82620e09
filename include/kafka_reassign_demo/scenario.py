"""The demo's cluster: the bundled skewed scenario, and a small plan for it without the planner."""
from __future__ import annotations

import json
from importlib import resources
from typing import Any

#: The bundled scenario, shipped inside the package (no repository needed once installed).
SCENARIO = "demo_scenario.json"


def load_scenario() -> dict[str, Any]:
    """The bundled demo scenario (package data)."""
    return json.loads(resources.files("kafka_reassign_demo").joinpath(SCENARIO).read_text(encoding="utf-8"))


def broker_bytes(snapshot: dict[str, Any]) -> dict[int, int]:
    """Bytes stored per broker (sum of its replicas' sizes)."""
    out = {b["id"]: 0 for b in snapshot["brokers"]}
    for t in snapshot["topics"]:
        for p in t["partitions"]:
            for r in p["replicas"]:
                out[r] = out.get(r, 0) + int(p.get("size_bytes", 0))
    return out


def demo_plan(snapshot: dict[str, Any], moves: int = 6) -> dict[str, Any]:
    """A small rack-aware plan moving replicas from the fullest brokers to the emptiest ones.

    Used when the Spark planner is not installed; a greedy demonstration, not the planner:
    each move takes a replica off the currently fullest broker to the emptiest broker of a
    rack the partition does not use yet, and only when that narrows the gap between the two.

    :param snapshot: cluster snapshot
    :param moves: at most this many partitions to move
    """
    rack = {b["id"]: b.get("rack") for b in snapshot["brokers"]}
    load = broker_bytes(snapshot)
    current = {(t["name"], p["partition"]): (list(p["replicas"]), int(p.get("size_bytes", 0)))
               for t in snapshot["topics"] for p in t["partitions"]}
    chosen: dict[tuple[str, int], list[int]] = {}
    while len(chosen) < moves:
        best = None
        for src in sorted(load, key=lambda b: -load[b]):
            for key, (replicas, size) in sorted(current.items(), key=lambda kv: -kv[1][1]):
                if key in chosen or src not in replicas or size == 0:
                    continue
                used_racks = {rack[r] for r in replicas if r != src}
                for dst in sorted((b for b in load if b not in replicas and rack[b] not in used_racks),
                                  key=lambda b: load[b]):
                    # Only moves that narrow the gap (no overshoot past each other).
                    if load[dst] + size < load[src]:
                        best = (key, src, dst, size)
                    break
                if best:
                    break
            if best:
                break
        if best is None:
            break
        key, src, dst, size = best
        replicas = [dst if r == src else r for r in current[key][0]]
        chosen[key] = replicas
        load[src] -= size
        load[dst] += size
    entries = [{"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
               for (t, p), r in sorted(chosen.items())]
    return {"version": 1, "partitions": entries}
