"""The run's steps in pages, so that an executor reads only the part of the plan it works on.

A plan of 100,000 moves is 100,000 KIP-435 steps or more; the window in flight needs a few
thousand at a time. :func:`paginate` lays the steps out once, in admission order: each
partition's chain of steps whole in one page, the chains ordered by the movement strategy's
static key of their first step (the same keys :class:`~kafka_reassign.execution.order.ReadyQueue`
orders by). :class:`StepBook` hands them out a page at a time. The DAG's execute task keeps the
pages where prepare stored them (an XCom each) and every wake reads only the pages it is working
on (:class:`~kafka_reassign.execution.step_state.StepStates`), whatever the size of the plan; the
CLI and the rehearsal keep the same pages in memory.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from kafka_reassign.cluster.state import TopicPartition
from kafka_reassign.execution.order import STRATEGIES, OrderContext, parse_strategy
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.execution.wake import throttle_lanes
from kafka_reassign.planning.leadership import senders

#: Steps per page (a partition's chain is never split, so a page may hold a few more).
PAGE_STEPS = 500


def data_brokers(step: StepMove, leader: int | None) -> tuple[int, ...]:
    """Brokers a step's bytes go through: the one sending (the leader) and the receivers."""
    if step.is_log_dir_only:
        return tuple(sorted(step.wanted_dirs()))
    if not step.adding:
        return ()
    source = leader if leader is not None and leader in step.current else step.current[0]
    return (source, *step.adding)


def step_lanes(step: StepMove, leader: int | None) -> tuple[int, ...]:
    """The throttle lanes a step's bytes pass (:func:`~kafka_reassign.execution.wake.throttle_lanes`)."""
    return throttle_lanes(data_brokers(step, leader), bool(step.adding))


def steps_fingerprint(steps: Iterable[StepMove]) -> str:
    """A short digest of the steps: a saved state only resumes the very same plan."""
    crc, n = 0, 0
    for s in steps:
        crc = zlib.crc32(f"{s.topic}\0{s.partition}\0{s.current}\0{s.target}\0{s.log_dirs}\n".encode(), crc)
        n += 1
    return f"{n}:{crc:08x}"


@dataclass(frozen=True)
class PagedStep:
    """One step as a page holds it.

    :param index: the step's index in the plan (what states, watches and reports name it by)
    :param step: the step
    :param sender: the broker expected to lead (and send its bytes) when it runs
    :param urp: its partition was under-replicated when the run was prepared
    """

    index: int
    step: StepMove
    sender: int | None
    urp: bool = False

    def to_json(self) -> list[Any]:
        return [self.index, self.step.to_json(), self.sender, self.urp]

    @classmethod
    def from_json(cls, d: Sequence[Any]) -> PagedStep:
        i, s, lead, urp = d
        return cls(int(i), StepMove.from_json(s), None if lead is None else int(lead), bool(urp))


@dataclass(frozen=True)
class BookHead:
    """What a run knows of its whole plan without reading a page.

    :param steps: steps in the plan
    :param partitions: partitions they move
    :param bytes_total: bytes they copy
    :param fingerprint: :func:`steps_fingerprint` of the steps in plan order
    :param pages: pages, in admission order
    :param lane_bytes: throttle lane (a broker's outbound or inbound throttle) -> bytes through it over the whole plan
    """

    steps: int
    partitions: int
    bytes_total: float
    fingerprint: str
    pages: int
    lane_bytes: dict[int, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "partitions": self.partitions, "bytes_total": self.bytes_total,
                "fingerprint": self.fingerprint, "pages": self.pages,
                "lane_bytes": {str(b): v for b, v in sorted(self.lane_bytes.items())}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BookHead:
        return cls(int(d["steps"]), int(d["partitions"]), float(d["bytes_total"]), str(d["fingerprint"]),
                   int(d["pages"]), {int(b): float(v) for b, v in d.get("lane_bytes", {}).items()})


class StepBook:
    """The head of a run's plan and its pages, read one at a time.

    :param head: the plan's totals
    :param load: page number -> its steps (a store read, or a list in memory)
    """

    def __init__(self, head: BookHead, load: Callable[[int], Sequence[PagedStep]]) -> None:
        self.head = head
        self._load = load
        #: pages read so far (what a wake costs)
        self.pages_read = 0

    def page(self, k: int) -> Sequence[PagedStep]:
        if not 0 <= k < self.head.pages:
            raise IndexError(f"page {k} of a plan of {self.head.pages} page(s)")
        self.pages_read += 1
        return self._load(k)

    @classmethod
    def in_memory(cls, steps: Sequence[StepMove], leaders: Mapping[TopicPartition, int] | None = None,
                  urp: Iterable[TopicPartition] = (), strategy: str | None = None) -> StepBook:
        """The book of ``steps`` with its pages held in memory (the CLI, the rehearsal, tests)."""
        head, pages = paginate(steps, leaders or {}, urp, strategy)
        return cls(head, pages.__getitem__)


def paginate(steps: Sequence[StepMove], leaders: Mapping[TopicPartition, int], urp: Iterable[TopicPartition] = (),
             strategy: str | None = None, page_steps: int = PAGE_STEPS) -> tuple[BookHead, list[list[PagedStep]]]:
    """Lay out the steps in pages in admission order; returns the head and the pages.

    :param steps: every KIP-435 step, each partition's steps in order
    :param leaders: partition -> leader when prepared
    :param urp: partitions under-replicated when prepared
    :param strategy: the movement strategy (its static keys order the chains)
    """
    urp_keys = set(urp)
    lead = senders(steps, leaders)
    lanes = [step_lanes(s, b) for s, b in zip(steps, lead)]
    chains: dict[TopicPartition, list[int]] = {}
    for i, s in enumerate(steps):
        chains.setdefault(s.key, []).append(i)
    step_bytes = [float(s.bytes_to_copy) for s in steps]
    chain_left = [0.0] * len(steps)
    lane_bytes: dict[int, float] = {}
    for chain in chains.values():
        left = 0.0
        for i in reversed(chain):
            left += step_bytes[i]
            chain_left[i] = left
            for b in lanes[i]:
                lane_bytes[b] = lane_bytes.get(b, 0.0) + step_bytes[i]
    ctx = OrderContext({}, chain_left, step_bytes, lanes, {i for i, s in enumerate(steps) if s.key in urp_keys})
    keys = [STRATEGIES[n][1] for n in parse_strategy(strategy)]
    ordered = sorted(chains.values(), key=lambda c: (*(x for fn in keys for x in fn(ctx, c[0])), c[0]))
    pages: list[list[PagedStep]] = []
    page: list[PagedStep] = []
    for chain in ordered:
        page.extend(PagedStep(i, steps[i], lead[i], i in ctx.urp) for i in chain)
        if len(page) >= page_steps:
            pages.append(page)
            page = []
    if page:
        pages.append(page)
    head = BookHead(len(steps), len(chains), float(sum(step_bytes)), steps_fingerprint(steps), len(pages),
                    lane_bytes)
    return head, pages
