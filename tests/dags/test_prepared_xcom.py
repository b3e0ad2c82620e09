"""The operators read prepare's XCom through the versioned payload: another version fails the task."""
from __future__ import annotations

from typing import Any

import pytest


class _TI:
    def __init__(self, value: Any) -> None:
        self.value = value

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        assert (task_ids, key) == ("prepare", "prepared")
        return self.value


def test_an_xcom_of_the_previous_release_fails_the_task_naming_the_versions():
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_reassign_airflow.operators.common import pull_prepared

    unversioned = {"plan": {"version": 1, "partitions": []}, "dry_run": False, "before": {}}
    with pytest.raises(AirflowFailException, match="no schema_version.*reads schema_version 1"):
        pull_prepared({"ti": _TI(unversioned)}, "prepare")  # type: ignore[arg-type]
    with pytest.raises(AirflowFailException, match="schema_version 2.*reads schema_version 1"):
        pull_prepared({"ti": _TI({**unversioned, "schema_version": 2})}, "prepare")  # type: ignore[arg-type]


def test_no_xcom_means_prepare_did_not_finish():
    from kafka_reassign_airflow.operators.common import pull_prepared

    assert pull_prepared({"ti": _TI(None)}, "prepare") is None  # type: ignore[arg-type]
