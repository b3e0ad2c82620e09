"""One real Airflow stack shared by the integration modules that drive Airflow over REST.

Starting an :class:`AirflowStack` (``db migrate``, then api-server, scheduler, dag-processor
and triggerer) costs 25-40 s on a 2-core machine. The modules whose settings agree (the
project's DAG files, no Airflow config of their own) ask for ``shared_stack`` instead and
reach their simulated clusters through connections created over the REST API at run time,
as an operator would. Tests of those modules run one after the other (collection order is
otherwise kept) and the stack is stopped right after the last of them, so no idle scheduler
and dag-processor take CPU from the tests that follow.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from airflow_stack import AirflowStack

DAGS = Path(__file__).resolve().parents[2] / "dags"
SHARED = "shared_stack"

#: the shared stack while it runs (stopped after the last test that uses it)
_RUNNING: list[AirflowStack] = []


def _uses_shared_stack(item: pytest.Item) -> bool:
    return SHARED in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests that use the shared stack into one block, where the last of them was."""
    users = [item for item in items if _uses_shared_stack(item)]
    if not users:
        return
    last = items.index(users[-1])
    before = [item for item in items[:last] if not _uses_shared_stack(item)]
    items[:] = before + users + items[last + 1:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    if _uses_shared_stack(item) and (nextitem is None or not _uses_shared_stack(nextitem)):
        _stop_shared()


def _stop_shared() -> None:
    while _RUNNING:
        # The stack is thrown away: a component still up 5 s after SIGTERM is killed (the default
        # 20 s grace was always used up, some component ignores SIGTERM while tasks are around).
        _RUNNING.pop().stop(grace=5.0)


@pytest.fixture(scope="session")
def shared_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    """api-server, scheduler, dag-processor and triggerer over a copy of dags/ (a module may add
    its own DAG file to ``dags_folder``). No kafka_default: each test points the connections it
    uses at its own cluster with :meth:`AirflowStack.put_connection`."""
    base = tmp_path_factory.mktemp("shared-airflow")
    dags = base / "dags"
    dags.mkdir()
    for path in DAGS.glob("*.py"):
        shutil.copyfile(path, dags / path.name)
    # spark_default as the DAG tests elsewhere set it (the rebalance runs here use the local engine).
    stack = AirflowStack(home=base / "airflow", dags_folder=dags,
                         connections={"spark_default": {"conn_type": "spark", "host": "local[2]"}})
    _RUNNING.append(stack)
    try:
        stack.start()
        yield stack
    finally:
        _stop_shared()
