"""One leader's replies to some followers shaped on the loopback with ``tc`` (htb), for the real
Kafka benchmarks that slow a link: calibration scenarios d and h, and health-adaptive concurrency.

Only the leader's replies on each follower's fetch connections are shaped (one htb class per
follower); everyone else's traffic goes out unshaped. A loopback someone else is shaping is
never touched, and :meth:`ShapedLinks.clear` removes the whole qdisc again.
"""
from __future__ import annotations

import subprocess
from typing import Any


def follower_fetch_ports(kafka: Any, leader: int, follower: int) -> list[str]:
    """Local ports of ``follower``'s connections to ``leader`` (its fetch sessions), from ``ss``."""
    port = kafka.brokers[leader].port
    pid = kafka.brokers[follower].pid
    ss = subprocess.run(["ss", "-tnpH", "state", "established", f"( dport = :{port} )"],
                        capture_output=True, text=True, check=True).stdout
    found = [line.split()[2].rsplit(":", 1)[1] for line in ss.splitlines() if f"pid={pid}," in line]
    if not found:
        raise RuntimeError(f"broker {follower} (pid {pid}) has no connection to broker {leader}:{port}")
    return found


def tc(*args: str) -> str:
    return subprocess.run(["tc", *args], capture_output=True, text=True, check=True).stdout


class ShapedLinks:
    """``leader``'s replies on the fetch connections of ``followers``, one htb class each.

    :param kafka: the local cluster (its brokers' ports and pids)
    :param burst: htb burst of each class (what passes at line rate before the shaping bites)
    """

    def __init__(self, kafka: Any, leader: int, followers: tuple[int, ...], burst: str = "32k") -> None:
        self.kafka, self.leader, self.followers, self.burst = kafka, leader, followers, burst
        self.on = False

    def shape(self, rate: float) -> None:
        """Set every link to ``rate`` bytes/s (the qdisc made on first use)."""
        bits = f"{int(rate * 8)}bit"
        spec = ["htb", "rate", bits, "ceil", bits, "burst", self.burst, "cburst", self.burst]
        if self.on:
            for f in self.followers:
                tc("class", "change", "dev", "lo", "parent", "1:", "classid", f"1:{f}", *spec)
            return
        if "noqueue" not in tc("qdisc", "show", "dev", "lo"):
            raise RuntimeError("the loopback already has a qdisc (someone else is shaping it): not touching it")
        port = str(self.kafka.brokers[self.leader].port)
        # htb without a default class: everyone else's traffic goes out unshaped
        tc("qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb")
        self.on = True
        for f in self.followers:
            tc("class", "add", "dev", "lo", "parent", "1:", "classid", f"1:{f}", *spec)
            for fetch_port in follower_fetch_ports(self.kafka, self.leader, f):
                tc("filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                   "match", "ip", "sport", port, "0xffff", "match", "ip", "dport", fetch_port, "0xffff",
                   "flowid", f"1:{f}")

    def clear(self) -> None:
        """Remove the qdisc (everything this object shaped)."""
        if self.on:
            self.on = False
            tc("qdisc", "del", "dev", "lo", "root")
