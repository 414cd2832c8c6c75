"""Runs that died (kill -9, OOM, a lost machine) are found and closed: marked failed, their
claims and locks freed, so that nothing waits an hour for a process that is gone."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.liveness import death
from mempipe.schemas.run import RunRecord, RunStatus


class RecoveredRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    flow: str
    host: str | None
    pid: int | None
    reason: str
    leases: list[str]


def recover_dead_runs(uow: UnitOfWork, now: datetime | None = None) -> list[RecoveredRun]:
    """Close every run recorded as running whose process is dead; idempotent."""
    at = now or datetime.now(UTC)
    holders = uow.leases.lease_holders()
    recovered = []
    for run in uow.runs.list_runs(running_only=True, limit=10_000):
        reason = death(run, at)
        if reason is None:
            continue
        uow.runs.finish_run(run.run_id, RunStatus.FAILED, run.counts, f"died: {reason}")
        recovered.append(
            RecoveredRun(
                run_id=run.run_id,
                flow=run.flow,
                host=run.host,
                pid=run.pid,
                reason=reason,
                leases=sorted(name for name, holder in holders.items() if holder == run.run_id),
            )
        )
    return recovered


def describe_holder(uow: UnitOfWork, run_id: str) -> str:
    """The run holding a lock, as an operator needs it to decide: which run, where, since when."""
    run: RunRecord | None = uow.runs.get_run(run_id)
    if run is None:
        return f"run {run_id}"
    where = f" on {run.host} (pid {run.pid})" if run.host else ""
    beat = run.heartbeat_at or run.started_at
    return (
        f"{run.flow} run {run_id}{where}, started {run.started_at.isoformat(timespec='seconds')}, "
        f"last heartbeat {beat.isoformat(timespec='seconds')}"
    )
