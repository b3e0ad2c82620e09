"""The planner's background stage (the summary's lower bound beside the leader stage)."""
from __future__ import annotations

import threading
import time

import pytest

from kafka_reassign.planning.spark.flow import Background


def test_the_stage_result_and_its_duration():
    def stage_fn(a: int, b: int) -> int:
        time.sleep(0.2)
        return a + b

    started = time.monotonic()
    with Background(stage_fn, 2, 3) as stage:
        assert stage.result() == 5
    assert 0.2 <= stage.seconds <= time.monotonic() - started + 0.001  # seconds is rounded to 1 ms


def test_a_stage_error_is_raised_where_its_result_is_asked():
    def broken() -> None:
        raise ValueError("lower bound failed")

    with Background(broken) as stage:
        with pytest.raises(ValueError, match="lower bound failed"):
            stage.result()


def test_the_stage_has_ended_when_the_driver_fails_beside_it():
    # the driver's error must not leave a Spark job of ours running into engine.close()
    ended = threading.Event()

    def slow() -> None:
        time.sleep(0.3)
        ended.set()

    with pytest.raises(KeyError):
        with Background(slow):
            raise KeyError("leader stage failed")
    assert ended.is_set()
