"""Record flow runs in the store: parameters and where the run's process is at the start, counts
and outcome at the end; dead runs closed before work is handed out."""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from typing import Any

from prefect import get_run_logger

from mempipe import bootstrap
from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.bootstrap import record_spend
from mempipe.domain.liveness import this_process
from mempipe.domain.run_outcome import run_status
from mempipe.interrupts import stop_requested, stop_signal
from mempipe.schemas.config import ProjectConfig
from mempipe.schemas.run import FileKind, RunRecord
from mempipe.services import runs as run_service
from mempipe.services.runs import RecoveredRun
from mempipe.services.written_files import record_written
from mempipe.tasks.policies import step


@step("prepare-store", retry_after=(0, 0))
def prepare_store(
    store_url: str, declarations: ProjectConfig | None = None, *, create: bool = False
) -> None:
    """Migrations applied and the project's declarations recorded, before any work starts;
    ``create`` for the jobs that bring data in."""
    bootstrap.prepare_store(store_url, declarations, create=create)


@step("record-run-start", retry_after=(0, 0))
def record_run_start(store_url: str, run_id: str, flow: str, parameters: dict[str, Any]) -> None:
    with unit_of_work(store_url) as uow:
        now = datetime.now(UTC)
        uow.runs.start_run(
            RunRecord(
                run_id=run_id,
                flow=flow,
                parameters=parameters,
                started_at=now,
                heartbeat_at=now,
                **this_process(),
            )
        )


@step("record-run-end", retry_after=(0, 0))
def record_run_end(
    store_url: str, run_id: str, counts: dict[str, int], error: str | None = None
) -> None:
    """A run stopped by a signal is recorded interrupted, with the counts of what it did, and
    with what the flow's process spent on providers for it (a Dask worker's tasks wrote
    theirs)."""
    with unit_of_work(store_url) as uow:
        stopped_by = (
            signal.Signals(stop_signal() or signal.SIGTERM).name if stop_requested() else None
        )
        status, error = run_status(stopped_by, error)
        uow.runs.finish_run(run_id, status, counts, error)
        record_spend(uow)


@step("recover-dead-runs")
def recover_dead_runs(store_url: str) -> list[RecoveredRun]:
    with unit_of_work(store_url) as uow:
        recovered = run_service.recover_dead_runs(uow)
        logger = get_run_logger()
        for run in recovered:
            logger.warning(
                "run %s (%s) died: %s; marked failed, freed %d lease(s)",
                run.run_id,
                run.flow,
                run.reason,
                len(run.leases),
            )
        return recovered


@step("record-written-file")
def record_written_file(
    store_url: str, path: str, kind: FileKind, run_id: str | None, user_id: str | None = None
) -> None:
    with unit_of_work(store_url) as uow:
        record_written(uow, path, kind, run_id, user_id)
