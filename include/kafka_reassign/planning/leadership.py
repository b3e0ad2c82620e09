"""Who leads each step of a run, and so sends its bytes: a new replica fetches from the leader."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from kafka_reassign.cluster.state import TopicPartition


def senders(steps: Iterable[Any], leaders: Mapping[TopicPartition, int]) -> list[int | None]:
    """The broker expected to lead (and so send the bytes of) each step when it runs.

    The prepare-time leader, until a step that only changes the replicas' order (a lead step, or
    a plan's reorder) hands leadership to its first replica; a leader leaving the replica list
    hands it to the first replica of the list that remains. The executor's accounting of who
    sends what (:mod:`kafka_reassign.execution.step_state`) and this estimate both use it.

    :param steps: StepMove-like objects (key, current, target), each partition's in order
    :param leaders: partition -> leader before the run
    """
    now: dict[TopicPartition, int | None] = {}
    out: list[int | None] = []
    for s in steps:
        key, current, target = (s.topic, s.partition), tuple(s.current), tuple(s.target)
        lead = now.get(key, leaders.get(key))
        if lead is None or lead not in current:
            lead = current[0] if current else None
        out.append(lead)
        if current != target and set(current) == set(target):  # a reorder: elected at once
            now[key] = target[0]
        elif lead is not None and lead not in target:
            now[key] = target[0] if target else None
        else:
            now[key] = lead
    return out
