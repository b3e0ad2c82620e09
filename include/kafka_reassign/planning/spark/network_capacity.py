"""The network-capacity goal (Cruise Control's NetworkInboundCapacityGoal and
NetworkOutboundCapacityGoal): a hard limit on each broker's network in and out.

A broker's link speed comes from the snapshot (``brokers[].network_bytes_per_sec``) or, for the
brokers it does not name, the run parameters the adaptive throttle reads too
(``broker_network_capacities``, then ``broker_network_capacity_bytes_per_sec``); a broker with none
has no network limit (as in Cruise Control, a capacity must be given: a link speed is not
something Kafka reports). Its limit is ``network_capacity_ceiling`` (0.8, Cruise Control's
capacity threshold) of the link, each way: network in is the produce it receives as leader or
follower, network out what it sends as leader (:func:`.loads.network_out`).

Like the disk capacity it is a rule, kept whether listed or not: no plan pushes a broker above
its limit (a broker already above may stay there, no higher), the network-in pass and the spread
pass treat the limit as each broker's own ceiling (brokers above it shed first), the leader
stage never hands a broker leadership that takes its network out above it, and the reconcile
step checks every broker once more. A cluster whose traffic cannot fit under the limits of the
brokers that may take it is refused before any search.
"""
from __future__ import annotations

from typing import Any

from kafka_reassign.errors import GoalError, Problem
from kafka_reassign.planning.spark.loads import Loads, network_out
from kafka_reassign.planning.spark.targets import BrokerInfo, Targets

#: bytes/s: rates are sums of floats
EPS = 1.0


def set_link_limits(brokers: dict[int, BrokerInfo], header: dict[str, Any], opts: Any) -> None:
    """Each broker's ``link_limit`` (bytes/s each way, None: no known link).

    :param opts: PlanOptions (network_capacity_ceiling, broker_network_capacities,
        broker_network_capacity_bytes_per_sec)
    """
    from kafka_reassign.throttle.adaptive import broker_rates

    given = {int(b["id"]): b.get("network_bytes_per_sec") for b in header["brokers"]}
    per_broker = broker_rates(opts.broker_network_capacities)
    for b, info in brokers.items():
        link = given.get(b) or per_broker.get(b) or opts.broker_network_capacity_bytes_per_sec
        info.link = float(link) if link else None
        info.link_limit = float(link) * opts.network_capacity_ceiling if link else None


def limits(brokers: dict[int, BrokerInfo]) -> dict[int, float]:
    """Broker -> its network limit, for the brokers that have one."""
    return {b: x.link_limit for b, x in brokers.items() if x.link_limit is not None}


def known_links(brokers: dict[int, BrokerInfo], ids: Any) -> dict[int, float]:
    """Broker -> link speed over ``ids`` when every one of them has one, else {}: the usage goals
    (network in, network out) even utilisation only then, as a share of a partly unknown total
    would be no share at all."""
    links = {b: brokers[b].link for b in ids}
    return {b: float(v) for b, v in links.items() if v} if links and all(links.values()) else {}


def check_network_room(brokers: dict[int, BrokerInfo], t: Targets, before: Loads, fanout: float) -> None:
    """Refuse a plan no placement can keep within the limits: the traffic of the brokers that
    cannot take or give any (excluded, dead, cordoned) stays, the rest must fit under the limits
    of the placeable brokers (when every one of them has a limit; one without takes any rest).

    :raises GoalError: naming network_capacity_ceiling
    """
    lim = limits(brokers)
    if not lim or any(b not in lim for b in t.placeable):
        return
    room = sum(lim[b] for b in t.placeable)
    out = network_out(before, fanout)
    problems = []
    for name, load in (("in", before.net_in), ("out", out)):
        fixed = sum(v for b, v in load.items() if b not in t.placeable and b not in t.drained)
        need = sum(load.values()) - fixed
        if need > room + EPS:
            problems.append(Problem("network_capacity_ceiling", f"the brokers that may take replicas carry "
                                    f"{need / 1e6:.1f} MB/s of network {name}, above network_capacity_ceiling "
                                    f"x their links = {room / 1e6:.1f} MB/s: add brokers or give the real "
                                    "link speeds", "network_capacity"))
    if problems:
        raise GoalError(problems)


def network_problems(brokers: dict[int, BrokerInfo], before: Loads, after: Loads, fanout: float) -> list[Problem]:
    """Brokers the plan pushes above their network limit (only those whose load it raises)."""
    lim = limits(brokers)
    if not lim:
        return []
    out_before, out_after = network_out(before, fanout), network_out(after, fanout)
    problems = []
    for b in sorted(lim):
        for name, was, now in (("in", before.net_in.get(b, 0.0), after.net_in.get(b, 0.0)),
                               ("out", out_before.get(b, 0.0), out_after.get(b, 0.0))):
            if now > was + EPS and now > lim[b] + EPS:
                problems.append(Problem(f"broker {b}", f"network {name} would be {now / 1e6:.2f} MB/s, above "
                                        f"network_capacity_ceiling x its link = {lim[b] / 1e6:.2f} MB/s",
                                        "network_capacity"))
    return problems


def capacity_summary(brokers: dict[int, BrokerInfo], before: Loads, after: Loads, fanout: float,
                     ceiling: float) -> tuple[dict[str, Any], list[str]]:
    """The summary's ``network_capacity``: the fullest link each way before and after (load /
    link speed), and a warning per broker left above its limit."""
    lim = limits(brokers)
    if not lim:
        return {"brokers_with_link": 0, "ceiling": ceiling}, []
    out_before, out_after = network_out(before, fanout), network_out(after, fanout)
    fig: dict[str, Any] = {"brokers_with_link": len(lim), "ceiling": ceiling}
    warnings = []
    for name, was, now in (("in", before.net_in, after.net_in), ("out", out_before, out_after)):
        fig[name] = {"before": _fullest(was, lim, ceiling), "after": _fullest(now, lim, ceiling)}
        over = sorted(b for b in lim if now.get(b, 0.0) > lim[b] + EPS)
        if over:
            warnings.append(f"brokers {over[:10]} stay above network_capacity_ceiling={ceiling:g} of their "
                            f"link for network {name} (no placement within the other goals brings them under)")
    return fig, warnings


def _fullest(load: dict[int, float], lim: dict[int, float], ceiling: float) -> float:
    """The largest load / link speed among the brokers with a link."""
    return round(max((load.get(b, 0.0) * ceiling / v for b, v in lim.items() if v > 0), default=0.0), 4)
