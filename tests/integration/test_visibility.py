"""What ops see of a run on the Prefect server: progress artifacts that reach 100 %, a table
artifact of the run's counts, and logs that say what was done, skipped and failed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    LogFilter,
    LogFilterFlowRunId,
)
from prefect.logging.handlers import APILogHandler

from mempipe.flows.backfill import backfill_flow
from mempipe.flows.reembed import reembed_flow
from mempipe.flows.replay import replay_flow

pytestmark = pytest.mark.prefect
SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"


def seen(run_id: str) -> tuple[list, list[str]]:
    """The run's artifacts and log messages, once the logs queued in this process are sent."""
    APILogHandler().flush()

    async def read() -> tuple[list, list[str]]:
        async with get_client() as client:
            artifacts = await client.read_artifacts(
                artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
            )
            logs = await client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[UUID(run_id)]))
            )
            return artifacts, [log.message for log in logs]

    return asyncio.run(read())


def test_replay_and_reembed_runs_show_progress_counts_and_what_was_done(
    logs_to_api, store_url, tmp_path
) -> None:
    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-64\n")
    backfill_flow(paths=[str(SAMPLE)], user_id="maya", store=store_url, config=str(config))
    summary = replay_flow(store=store_url, config=str(config), audit_dir=str(tmp_path / "audit"))
    artifacts, logs = seen(summary.run_id)
    progress = [a for a in artifacts if a.type == "progress"]
    assert progress
    assert all(float(a.data) == 100.0 for a in progress)
    (table,) = [a for a in artifacts if a.type == "table"]
    assert json.loads(table.data)[0]["extractions"] == summary.extractions == 24
    assert any("extractions done, 0 failed, 0 done by another replay meanwhile" in m for m in logs)

    moved = reembed_flow(model="hashing-32", store=store_url, config=str(config), gate=None)
    artifacts, logs = seen(moved.run_id)
    assert {"progress", "table"} <= {a.type for a in artifacts}
    (table,) = [a for a in artifacts if a.type == "table"]
    assert {row["collection"] for row in json.loads(table.data)} >= {"stm", "semantic"}
    assert any(m.startswith("semantic: ") and "hashing-32 vector" in m for m in logs)
    assert any(m.startswith("switched ") for m in logs)
