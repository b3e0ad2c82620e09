"""A prepared run as the execute task reads it on every wake: a small head and the steps in pages.

Prepare stores :class:`PagedRun` (limits, throttle rate, the plan's totals) and the pages of
:func:`~kafka_reassign.execution.book.paginate` once; each wake of the execute task reads the
head, its saved state and only the pages the window works on
(:class:`~kafka_reassign.execution.step_state.StepStates`). What a wake reads and writes then
follows the window, not the plan: 100,000 steps cost a wake what 2,000 do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from kafka_reassign.execution.book import BookHead, PagedStep, StepBook, paginate
from kafka_reassign.execution.executor import MoveExecutor
from kafka_reassign.execution.limits import ExecutionLimits
from kafka_reassign.run.prepare import PreparedRun
from kafka_reassign.throttle.record import RecordStore
from kafka_reassign.throttle.replica_lists import ReplicaThrottle


@dataclass(frozen=True)
class PagedRun:
    """What the execute task needs of a prepared run besides its pages.

    :param limits: the executor's caps and time limits
    :param throttle_rate: the replication throttle in force (None: the run is not throttled)
    :param cluster_id: the cluster the run was prepared on
    :param dry_run: nothing is moved
    :param poll_interval_seconds: time between full polls
    :param book: the plan's totals and page count
    """

    limits: ExecutionLimits
    throttle_rate: int | None
    cluster_id: str | None
    dry_run: bool
    poll_interval_seconds: float
    book: BookHead

    @classmethod
    def of(cls, prepared: PreparedRun, strategy: str | None = None) -> tuple[PagedRun, list[list[PagedStep]]]:
        """The head of ``prepared`` and its pages, in admission order."""
        limits = prepared.limits(strategy)
        limits.validate()  # a bad strategy is named here, before the steps are laid out by it
        head, pages = paginate(prepared.steps, prepared.leaders, prepared.urp, limits.strategy)
        return cls(limits, prepared.throttle_spec.rate, prepared.cluster_id, prepared.params.dry_run,
                   float(prepared.params.poll_interval_seconds), head), pages

    def to_json(self) -> dict[str, Any]:
        return {"limits": self.limits.to_json(), "throttle_rate": self.throttle_rate, "cluster_id": self.cluster_id,
                "dry_run": self.dry_run, "poll_interval_seconds": self.poll_interval_seconds,
                "book": self.book.to_json()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PagedRun:
        rate = d.get("throttle_rate")
        return cls(ExecutionLimits(**d["limits"]), None if rate is None else int(rate), d.get("cluster_id"),
                   bool(d["dry_run"]), float(d["poll_interval_seconds"]), BookHead.from_json(d["book"]))

    def executor(self, load_page: Callable[[int], Sequence[PagedStep]], run_id: str,
                 record_store: RecordStore | None, *, saved: Mapping[str, Any] | None = None,
                 produce_rates: Mapping[Any, float] | None = None) -> MoveExecutor:
        """The run's executor over pages read with ``load_page``; resumed from ``saved`` state.

        :param record_store: where the throttle record is (None: the replica lists are not managed)
        :param saved: what an ExecutionStore loaded for this run (``{"state": ...}``)
        """
        return build_executor(StepBook(self.book, load_page), self.limits, self.throttle_rate, self.cluster_id,
                              run_id, record_store, saved=saved, produce_rates=produce_rates)


def page_from_json(data: Sequence[Any]) -> list[PagedStep]:
    """A page as :func:`pages_json` wrote it."""
    return [PagedStep.from_json(e) for e in data]


def pages_json(pages: Sequence[Sequence[PagedStep]]) -> list[list[Any]]:
    """Each page as plain JSON (what prepare stores, one value a page)."""
    return [[e.to_json() for e in page] for page in pages]


def build_executor(book: StepBook, limits: ExecutionLimits, throttle_rate: int | None, cluster_id: str | None,
                   run_id: str, record_store: RecordStore | None, *, saved: Mapping[str, Any] | None = None,
                   produce_rates: Mapping[Any, float] | None = None) -> MoveExecutor:
    """An executor over ``book`` with the run's throttle record; resumed from ``saved`` state."""
    replica_throttle = ReplicaThrottle(record_store, run_id, cluster_id) \
        if throttle_rate is not None and record_store is not None else None
    ex = MoveExecutor((), limits, run_id=run_id, throttle_rate=throttle_rate, replica_throttle=replica_throttle,
                      produce_rates=produce_rates, record_store=record_store, cluster_id=cluster_id, book=book)
    if saved and saved.get("state"):
        ex.load_state(saved["state"])
    return ex
