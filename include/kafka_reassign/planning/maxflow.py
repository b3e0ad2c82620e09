"""A small max-flow (Dinic) on float capacities, for the source-free throttle bound.

The graph is built once and its sink capacities are reset for each feasibility test
(:meth:`FlowNetwork.reset`), so a parametric search re-uses the edge arrays.
"""
from __future__ import annotations

from collections import deque

#: Residual capacities at or below this count as saturated (callers normalise capacities to ~1).
EPS = 1e-12


class FlowNetwork:
    """A directed graph with paired residual edges: edge ``e`` and its reverse ``e ^ 1``.

    :param nodes: number of nodes (ids ``0 .. nodes-1``)
    """

    def __init__(self, nodes: int) -> None:
        self.adj: list[list[int]] = [[] for _ in range(nodes)]
        self.to: list[int] = []
        self.cap: list[float] = []

    def add_edge(self, u: int, v: int, cap: float) -> int:
        """Add ``u -> v`` with capacity ``cap``; returns the edge id (its reverse is ``id ^ 1``)."""
        e = len(self.to)
        self.to += [v, u]
        self.cap += [cap, 0.0]
        self.adj[u].append(e)
        self.adj[v].append(e + 1)
        return e

    def reset(self, caps: list[float]) -> None:
        """Forget any flow: ``caps`` (taken over, not copied) holds every edge's capacity."""
        self.cap = caps

    def push(self, e: int, amount: float) -> None:
        """Send ``amount`` along edge ``e`` (a greedy start before :meth:`max_flow`)."""
        self.cap[e] -= amount
        self.cap[e ^ 1] += amount

    def _levels(self, s: int, t: int) -> list[int] | None:
        level = [-1] * len(self.adj)
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.adj[u]:
                v = self.to[e]
                if level[v] < 0 and self.cap[e] > EPS:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level if level[t] >= 0 else None

    def _blocking_flow(self, s: int, t: int, level: list[int]) -> float:
        """Augment along shortest paths until none is left at this level graph (iterative DFS)."""
        adj, to, cap = self.adj, self.to, self.cap
        it = [0] * len(adj)
        total = 0.0
        path: list[int] = []
        u = s
        while True:
            if u == t:
                f = min(cap[e] for e in path)
                for e in path:
                    cap[e] -= f
                    cap[e ^ 1] += f
                total += f
                path.clear()
                u = s
                continue
            edges, i = adj[u], it[u]
            while i < len(edges) and not (cap[edges[i]] > EPS and level[to[edges[i]]] == level[u] + 1):
                i += 1
            it[u] = i
            if i < len(edges):
                path.append(edges[i])
                u = to[edges[i]]
                continue
            if u == s:
                return total
            level[u] = -1  # a dead end: no augmenting path goes through it at this level
            u = to[path.pop() ^ 1]
            it[u] += 1

    def max_flow(self, s: int, t: int) -> float:
        """Flow added from ``s`` to ``t`` on top of what is already pushed."""
        total = 0.0
        while (level := self._levels(s, t)) is not None:
            total += self._blocking_flow(s, t, level)
        return total

    def reachable(self, s: int) -> set[int]:
        """Nodes reachable from ``s`` in the residual graph (the source side of a minimum cut)."""
        seen = {s}
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.adj[u]:
                v = self.to[e]
                if v not in seen and self.cap[e] > EPS:
                    seen.add(v)
                    queue.append(v)
        return seen
