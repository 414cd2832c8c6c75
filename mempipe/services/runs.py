"""Runs as the store records them: listed with their liveness, shown one at a time, their
provider batches cancelled; and runs that died (kill -9, OOM, a lost machine) found and closed:
marked failed, their claims and locks freed, so that nothing waits an hour for a process that
is gone."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.liveness import death
from mempipe.errors import ConfigError
from mempipe.schemas.batch import BatchStatus, ProviderBatch
from mempipe.schemas.costs import CostConfig, SpendRow
from mempipe.schemas.run import RunRecord, RunStatus, WrittenFile


class RecoveredRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    flow: str
    host: str | None
    pid: int | None
    reason: str
    leases: list[str]


class RunView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: RunRecord
    dead: str | None = Field(default=None, description="why a run recorded as running is dead")
    leases: list[str] = Field(default_factory=list)


class RunList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    runs: list[RunView]


class RunShown(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    run: RunRecord
    dead: str | None = Field(default=None, description="why a run recorded as running is dead")
    files: list[WrittenFile] = Field(
        default_factory=list, description="where the run wrote users' text (audit, rejects, ...)"
    )
    never_written: list[str] = Field(
        default_factory=list,
        description="of those, the paths recorded before writing that were never written",
    )
    batches: list[BatchShown] = Field(
        default_factory=list, description="what the run submitted to a provider's Batch API"
    )
    spend: list[SpendShown] = Field(
        default_factory=list,
        description="what its provider requests spent, per day, kind, model and memory type",
    )
    spend_usd: float | None = Field(
        default=None, description="at the configuration's prices; None: an unpriced model"
    )


class SpendShown(SpendRow):
    """A spend row with its price (None: a model the price table does not hold)."""

    usd: float | None = None


class BatchShown(BaseModel):
    """A provider batch of a run, without its items."""

    model_config = ConfigDict(extra="forbid")

    key: str
    batch_id: str | None
    scope: str
    status: BatchStatus
    requests: int
    error: str | None = None


def shown_batches(batches: list[ProviderBatch]) -> list[BatchShown]:
    fields = set(BatchShown.model_fields)
    return [BatchShown.model_validate(b.model_dump(include=fields)) for b in batches]


class Recovery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    recovered: list[RecoveredRun]


def list_runs(uow: UnitOfWork, running: bool, limit: int) -> RunList:
    """The newest ``limit`` runs (``running``: those recorded as running), each with why it is
    dead where it is, and the locks it holds."""
    now = datetime.now(UTC)
    holders = uow.leases.lease_holders()
    return RunList(
        store=uow.url,
        runs=[
            RunView(
                run=run,
                dead=death(run, now),
                leases=sorted(n for n, holder in holders.items() if holder == run.run_id),
            )
            for run in uow.runs.list_runs(running_only=running, limit=limit)
        ],
    )


def show_run(uow: UnitOfWork, run_id: str, costs: CostConfig | None = None) -> RunShown:
    """One run's record, the files it wrote (and which were never written), its batches, and
    what it spent, priced with ``costs``."""
    run = recorded(uow, run_id)
    files = [f for f in uow.files.written_files() if f.run_id == run_id]
    prices = (costs or CostConfig()).prices
    spent = [SpendShown(**row.model_dump(), usd=row.cost(prices)) for row in uow.runs.spend(run_id)]
    unpriced = any(row.usd is None for row in spent)
    return RunShown(
        spend=spent,
        spend_usd=None if unpriced else round(sum(row.usd or 0.0 for row in spent), 6),
        store=uow.url,
        run=run,
        dead=death(run, datetime.now(UTC)),
        files=files,
        never_written=[f.path for f in files if not Path(f.path).exists()],
        batches=shown_batches(uow.batches.run_batches(run_id)),
    )


def recover(uow: UnitOfWork) -> Recovery:
    return Recovery(store=uow.url, recovered=recover_dead_runs(uow))


def recorded(uow: UnitOfWork, run_id: str) -> RunRecord:
    """The run's record; a run the store does not hold is an error saying where to look."""
    run = uow.runs.get_run(run_id)
    if run is None:
        raise ConfigError(f"no run {run_id!r} in {uow.url} (`mempipe runs` lists them)")
    return run


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
