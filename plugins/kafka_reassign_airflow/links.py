"""The plan task's link to its summary and before/after chart (the progress page of its run)."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

#: Where the UI plugin serves the progress page (kafka_reassign_airflow.plugin.URL_PREFIX).
PAGE_PREFIX = "/kafka-reassign"


class PlanChartLink(BaseOperatorLink):
    """"Plan summary & chart": the run's progress page, opened at its plan section."""

    name = "Plan summary & chart"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return f"{PAGE_PREFIX}/?dag_id={quote(ti_key.dag_id)}&run_id={quote(ti_key.run_id)}#plan"
