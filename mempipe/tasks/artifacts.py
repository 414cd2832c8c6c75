"""Publish run summaries as Prefect table artifacts, for the UI."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE


@task(name="publish-table", cache_policy=NO_CACHE)
def publish_table(key: str, rows: list[dict[str, Any]], description: str) -> None:
    create_table_artifact(key=key, table=rows, description=description)
