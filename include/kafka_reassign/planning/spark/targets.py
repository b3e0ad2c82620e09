"""Per-broker byte targets, the lower bounds, and each group's quotas (driver, brokers-sized).

* The target of a placeable broker is its share of the movable bytes by capacity (equal
  utilisation); a drained broker's target is 0; excluded, dead and cordoned brokers keep what they hold.
* The lower bound (:func:`accepted_lower_bound`) is against the balance the goal accepts: each
  broker at most ``balance_tolerance`` above the mean utilisation, not on it (proof in its
  docstring).
* Racks: with at least as many racks as replicas a rack holds at most one replica of each
  partition, so its load is capped at the bytes of all partitions. Rack targets are
  water-filled under that cap (the capacity share of a capped rack goes to the others) and
  brokers share their rack's target by capacity. The search aims at them.
* Quotas: in each rack the over-target brokers (sources) shed into the rack's under-target
  brokers first; racks with a net surplus export it to racks with a net need, split in
  proportion to need, and each importing broker's share is sliced between the exporting racks.
  So every group knows in advance the bytes it may send to each receiver.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from kafka_reassign.planning.spark.search import GroupQuotas

#: a source stops within this fraction of the mean broker load above its target (and a receiver
#: may go as far above it): a few small replicas close the gap instead of one large one overshooting
SLACK = 0.008
#: a capped rack is filled to this fraction of "one replica of every partition": reaching the
#: cap exactly would need a move for every partition missing that rack
RACK_FILL = 0.95
NO_RACK_GROUPS = 4


@dataclass
class BrokerInfo:
    id: int
    rack: str
    capacity: float
    alive: bool = True
    cordoned: bool = False  # every log dir cordoned (KIP-1066): keeps its replicas, receives none
    link_limit: float | None = None  # network in / out it may not be pushed above (network_capacity)
    link: float | None = None  # its link speed in bytes/s, when given


@dataclass
class Targets:
    """Targets; ``group`` maps each broker to its search group (its rack)."""

    target: dict[int, float]
    placeable: list[int]
    drained: set[int]
    group: dict[int, str]
    mean_util: float
    rack_capped: list[str] = field(default_factory=list)
    receivers: set[int] = field(default_factory=set)


def _water_fill(share: dict[str, float], cap: dict[str, float], total: float) -> dict[str, float]:
    """Split ``total`` by ``share`` with per-key caps, giving a capped key's excess to the rest."""
    out: dict[str, float] = {}
    free = dict(share)
    left = total
    while free:
        weight = sum(free.values()) or 1.0
        over = [k for k in free if left * free[k] / weight > cap.get(k, float("inf"))]
        if not over:
            out.update({k: left * free[k] / weight for k in free})
            break
        for k in over:
            out[k] = cap[k]
            left -= cap[k]
            del free[k]
    if not free and left > 1e-6:  # every key capped: the rest goes by share after all
        weight = sum(share.values()) or 1.0
        out = {k: v + left * share[k] / weight for k, v in out.items()}
    return out


def search_groups(brokers: dict[int, BrokerInfo], max_rf: int) -> dict[int, str]:
    """Broker -> search group. With at least as many racks as replicas: its rack (a partition
    uses each rack once, so a rack it does not use can receive from one other rack without
    meeting that rack's own moves of it). With fewer racks than replicas a partition repeats a
    rack and moves into a rack it uses would meet: one group. Without racks,
    :data:`NO_RACK_GROUPS` groups of brokers by id order."""
    racks = {x.rack for x in brokers.values() if not x.rack.startswith("__no_rack_")}
    if racks:
        return {b: x.rack if len(racks) >= max_rf else "all" for b, x in brokers.items()}
    return {b: f"group-{i % NO_RACK_GROUPS}" for i, b in enumerate(sorted(brokers))}


def compute_targets(brokers: dict[int, BrokerInfo], loads: dict[int, float], drain: set[int],
                    exclude: set[int], partition_bytes: float, max_rf: int) -> Targets:
    """Targets (the bound is :func:`accepted_lower_bound`).

    :param loads: bytes per broker now
    :param drain: brokers that must end empty
    :param partition_bytes: sum of partition sizes (each partition once)
    """
    placeable = sorted(b for b, x in brokers.items()
                       if x.alive and not x.cordoned and b not in exclude and b not in drain)
    movable = [b for b in brokers if b in placeable or b in drain]
    total = sum(loads.get(b, 0.0) for b in movable)
    cap_p = sum(brokers[b].capacity for b in placeable) or 1.0
    target = {b: loads.get(b, 0.0) for b in brokers}
    target.update({b: 0.0 for b in drain})
    racks = sorted({brokers[b].rack for b in placeable})
    rack_cap = {r: sum(brokers[b].capacity for b in placeable if brokers[b].rack == r) for r in racks}
    fixed_rack = {r: sum(loads.get(b, 0.0) for b in brokers if brokers[b].rack == r
                         and b not in placeable and b not in drain) for r in racks}
    fill = RACK_FILL if len(racks) > max_rf else 1.0  # racks == RF: each rack holds one of each
    limit = ({r: max(0.0, fill * partition_bytes - fixed_rack[r]) for r in racks}
             if len(racks) >= max_rf > 1 else {})
    rack_target = _water_fill(rack_cap, limit, total)
    capped = [r for r in racks if r in limit and rack_target[r] >= limit[r] - 1e-6
              and total * rack_cap[r] / cap_p > limit[r]]
    for b in placeable:
        r = brokers[b].rack
        target[b] = rack_target[r] * brokers[b].capacity / rack_cap[r]
    return Targets(target=target, placeable=placeable, drained=set(drain),
                   group=search_groups(brokers, max_rf), mean_util=total / cap_p,
                   rack_capped=capped, receivers=set(placeable))


def fill_only(t: Targets, brokers: dict[int, BrokerInfo], loads: dict[int, float],
              receivers: set[int]) -> Targets:
    """Targets for add-brokers: only ``receivers`` gain data, up to their balanced target; the
    other brokers give it up from the top, down to one common utilisation level (found by
    bisection), so the fullest brokers shed first."""
    need = sum(max(0.0, t.target[b] - loads.get(b, 0.0)) for b in receivers)
    givers = [b for b in t.placeable if b not in receivers]

    def shed(level: float) -> float:
        return sum(max(0.0, loads.get(b, 0.0) - level * brokers[b].capacity) for b in givers)

    lo, hi = 0.0, max((loads.get(b, 0.0) / brokers[b].capacity for b in givers), default=0.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if shed(mid) < need else (mid, hi)
    target = dict(t.target)
    for b in givers:
        target[b] = min(loads.get(b, 0.0), hi * brokers[b].capacity)
    for b in receivers:
        target[b] = max(loads.get(b, 0.0), t.target[b])
    return Targets(target=target, placeable=t.placeable, drained=t.drained, group=t.group,
                   mean_util=t.mean_util,
                   rack_capped=t.rack_capped, receivers=set(receivers) & set(t.placeable))


def accepted_lower_bound(brokers: dict[int, BrokerInfo], t: Targets, loads: dict[int, float],
                         tolerance: float) -> float:
    """The least data any plan must copy to reach the balance the goal accepts: every live
    broker's utilisation at most ``1 + tolerance`` times the mean (the summary's disk balance,
    whose warning fires above it) and every drained broker empty::

        edge_b = mean x capacity_b x (1 + tolerance),  mean = bytes on live brokers / their capacity
        bound  = sum over placeable or drained b of max(0, load_b - edge_b)     (drained: edge 0)

    Proof. The balancing goals keep each partition's replica count, so a plan copies exactly the
    bytes of its new replicas, and every new replica pairs with a removed one of the same size:
    bytes copied = sum over brokers of bytes lost >= sum of max(0, load_b - final_b). The mean
    does not depend on the plan (drained data lands on live brokers; dead brokers keep theirs), so a plan reaching the accepted balance has final_b <= edge_b for every b and
    copies at least ``bound``. Only bytes above an edge are counted, so a plan that takes exactly
    those bytes off and lands them under the edges reaches the balance with ``bound`` copied: the
    bound is never above what such a plan moves. Rack caps and replica sizes may make the balance
    unreachable (the summary then warns); they never lower what must leave. Where the cluster is
    already within tolerance the bound is 0.

    :param brokers: broker id -> capacity, rack, alive
    :param t: the goal's targets (placeable and drained brokers)
    :param loads: bytes per broker now
    :param tolerance: the goal's ``balance_tolerance``
    """
    return sum(disk_excess(brokers, t, loads, tolerance).values())


def disk_excess(brokers: dict[int, BrokerInfo], t: Targets, loads: dict[int, float],
                tolerance: float) -> dict[int, float]:
    """Placeable or drained broker -> ``max(0, load_b - edge_b)``: the bytes it must lose to
    reach the disk goal's accepted balance (its term of :func:`accepted_lower_bound`).

    :param tolerance: the goal's ``balance_tolerance``
    """
    live = [b for b, x in brokers.items() if x.alive and b not in t.drained]
    capacity = sum(brokers[b].capacity for b in live)
    ends_live = sum(loads.get(b, 0.0) for b in set(live) | t.drained)  # a drained broker's data lands on live ones
    mean = ends_live / capacity if capacity else 0.0
    edge = {b: mean * brokers[b].capacity * (1 + tolerance) for b in t.placeable}
    return {b: max(0.0, loads.get(b, 0.0) - edge.get(b, 0.0)) for b in set(t.placeable) | t.drained}


def count_balance(values: Mapping[int, float], ids: list[int]) -> float:
    """max / mean over ``ids`` of a count or a rate (a broker without a value counts 0; 1.0 when
    every value is 0, e.g. no produce rate known)."""
    mean = sum(values.get(b, 0.0) for b in ids) / len(ids) if ids else 0.0
    return max(values.get(b, 0.0) for b in ids) / mean if mean > 0 else 1.0


def moved_over_bound(moved: float, bound: float | None, reached: bool = True) -> float | None:
    """Data moved / the lower bound (4 decimals): 1.0 when both are 0; None when the bound is
    unknown, is 0 while data moves, or does not apply because the plan stops short of the
    balance the bound is for (``reached`` False)."""
    if bound is None or not reached:
        return None
    if bound <= 0:
        return 1.0 if moved == 0 else None
    return round(moved / bound, 4)


def group_quotas(t: Targets, loads: dict[int, float], counts: dict[int, int], hard_cap: dict[int, float],
                 tolerance: float) -> tuple[dict[str, GroupQuotas], dict[str, dict[str, float]]]:
    """Each group's sources and receiver quotas, and the bytes each group exports to each other
    group (see the module docstring).

    :param hard_cap: bytes a receiver may hold at most (capacity x capacity_ceiling)
    :param tolerance: fraction of its target a broker may end above or below it
    """
    mean = (sum(t.target[b] for b in t.placeable) / len(t.placeable)) if t.placeable else 0.0
    slack = {b: SLACK * mean for b in t.target}
    members: dict[str, list[int]] = {}
    for b in sorted(set(t.placeable) | t.drained):
        members.setdefault(t.group[b], []).append(b)
    # a broker less than half the tolerance above its target counts as balanced (Cruise Control's
    # balance threshold; receivers overfill by less, so a second plan moves nothing); one above
    # it sheds down to the target itself
    excess = {g: {b: loads.get(b, 0.0) - t.target[b] for b in bs
                  if b in t.drained or loads.get(b, 0.0) > t.target[b] * (1 + tolerance / 2)}
              for g, bs in members.items()}
    need = {g: {b: t.target[b] - loads.get(b, 0.0) for b in bs
                if b in t.receivers and loads.get(b, 0.0) < t.target[b]} for g, bs in members.items()}
    supply = {g: sum(v.values()) for g, v in excess.items()}
    demand = {g: sum(v.values()) for g, v in need.items()}
    surplus = {g: supply[g] - demand[g] for g in members if supply[g] > demand[g]}
    shortage = {g: demand[g] - supply[g] for g in members if demand[g] > supply[g]}
    total_short = sum(shortage.values()) or 1.0
    room = {b: hard_cap[b] - loads.get(b, 0.0) for b in t.placeable}
    movable = sorted(set(t.placeable) | t.drained)
    total_b = sum(t.target[b] for b in movable) or 1.0
    total_c = sum(counts.get(b, 0) for b in movable)
    count_excess = {b: counts.get(b, 0) - total_c * t.target[b] / total_b for b in movable}
    out: dict[str, GroupQuotas] = {}
    flows = {g: {h: surplus[g] * short / total_short for h, short in shortage.items()} for g in surplus}
    for g in members:
        local_share = min(1.0, supply[g] / demand[g]) if demand[g] else 0.0
        local = {b: v * local_share for b, v in need[g].items()}
        exports: dict[int, float] = {}
        if g in surplus:
            for h, short in shortage.items():
                imp_share = short / demand[h]
                for b, v in need[h].items():
                    exports[b] = v * imp_share * surplus[g] / total_short
        out[g] = GroupQuotas(sources=excess[g], drained={b for b in members[g] if b in t.drained},
                             local=local, exports=exports, slack=slack,
                             give={b: tolerance * t.target[b] for b in t.target},
                             hard_limit={b: room[b] for b in list(local) + list(exports)},
                             count_excess={b: count_excess[b] for b in excess[g]})
    return out, flows
