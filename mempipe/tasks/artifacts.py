"""Publish run summaries as Prefect table artifacts, for the UI."""

from __future__ import annotations

from typing import Any

from prefect.artifacts import create_table_artifact

from mempipe.tasks.policies import step


@step("publish-table")
def publish_table(key: str, rows: list[dict[str, Any]], description: str) -> None:
    create_table_artifact(key=key, table=rows, description=description)
