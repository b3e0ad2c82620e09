"""The steps in pages: admission order, chains kept whole, totals, and an executor over stored pages."""
from __future__ import annotations

import json

from kafka_reassign.execution.book import PagedStep, StepBook, paginate, steps_fingerprint
from kafka_reassign.execution.executor import MoveExecutor
from kafka_reassign.execution.limits import ExecutionLimits
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.run.paged import build_executor, page_from_json, pages_json


def chain(p: int, lists: list[tuple[int, ...]], size: int) -> list[StepMove]:
    n = len(lists) - 1
    return [StepMove("t", p, lists[i], lists[i + 1], size_bytes=size, step_index=i, step_count=n) for i in range(n)]


def plan(partitions: int) -> list[StepMove]:
    """Partitions of growing size; every third moves two replicas (a chain of two steps)."""
    steps: list[StepMove] = []
    for p in range(partitions):
        lists = [(1, 2, 3), (4, 2, 3), (4, 5, 3)] if p % 3 == 0 else [(1, 2, 3), (1 + p % 5 + 5, 2, 3)]
        steps += chain(p, lists, size=1000 + p)
    return steps


def test_pages_hold_whole_chains_in_the_strategy_order_and_the_head_adds_up():
    steps = plan(1_000)
    head, pages = paginate(steps, {}, strategy="largest-first", page_steps=100)
    flat = [e for page in pages for e in page]
    assert sorted(e.index for e in flat) == list(range(len(steps)))
    # Largest first: the partitions' sizes fall page after page; a partition's steps sit together in order.
    sizes = [e.step.size_bytes for e in flat]
    assert sizes == sorted(sizes, reverse=True)
    for page in pages:
        keys = [e.step.key for e in page]
        for key in set(keys):
            at = [k for k, x in enumerate(keys) if x == key]
            assert at == list(range(at[0], at[0] + len(at)))  # together
            assert [page[k].step.step_index for k in at] == sorted(page[k].step.step_index for k in at)
        assert len(page) <= 101  # a chain of two may close a page one step over
    assert head.steps == len(steps) and head.partitions == 1_000 and head.pages == len(pages)
    assert head.bytes_total == sum(s.bytes_to_copy for s in steps) and head.fingerprint == steps_fingerprint(steps)
    assert sum(head.lane_bytes.values()) == 2 * head.bytes_total  # every byte leaves one broker, enters one


def test_smallest_first_reverses_the_pages_and_the_sender_is_recorded():
    steps = plan(50)
    _, pages = paginate(steps, {("t", p): 2 for p in range(50)}, strategy="smallest-first", page_steps=10)
    sizes = [e.step.size_bytes for page in pages for e in page]
    assert sizes == sorted(sizes)
    assert {e.sender for page in pages for e in page} == {2}  # the prepare-time leader sends


def test_an_executor_over_stored_pages_picks_what_one_over_the_steps_picks():
    steps = plan(3_000)
    limits = ExecutionLimits(max_partition_movements=200, max_movements_per_broker=60)
    head, pages = paginate(steps, {}, strategy=limits.strategy)
    stored = [json.dumps(p) for p in pages_json(pages)]
    reads: list[int] = []

    def load(k: int) -> list[PagedStep]:
        reads.append(k)
        return page_from_json(json.loads(stored[k]))

    from_store = build_executor(StepBook(head, load), limits, None, None, "r", None)
    direct = MoveExecutor(steps, limits)
    assert from_store.pick(0.0) == direct.pick(0.0)
    # Twice the cluster cap eligible is enough: the rest of the plan was not read.
    assert len(reads) < len(pages) and reads == list(range(len(reads)))
