"""Runs as the store records them: runs (list, with liveness), recover (close dead runs)."""

from __future__ import annotations

import click
from pydantic import BaseModel, ConfigDict, Field

from mempipe.cli.options import emit, json_option, reports_errors, store_options
from mempipe.schemas.run import RunRecord
from mempipe.services.runs import RecoveredRun


class RunView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: RunRecord
    dead: str | None = Field(default=None, description="why a run recorded as running is dead")
    leases: list[str] = Field(default_factory=list)


class RunList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    runs: list[RunView]


class Recovery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    recovered: list[RecoveredRun]


@click.command()
@store_options
@json_option
@click.option("--running", is_flag=True, help="Only runs recorded as running.")
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="The newest this many runs.",
)
@reports_errors
def runs(
    store: str | None,
    config: str | None,
    store_secret: str | None,
    as_json: bool,
    running: bool,
    limit: int,
) -> None:
    """Recent runs, newest first: flow, status, host and pid, heartbeat, the locks each holds,
    and whether a run recorded as running is in fact dead (free it with `mempipe recover`)."""
    from datetime import UTC, datetime

    from mempipe.bootstrap import load_context
    from mempipe.domain.liveness import death

    now = datetime.now(UTC)
    with load_context(store, config, store_secret).unit_of_work(read_only=True) as uow:
        holders = uow.leases.lease_holders()
        result = RunList(
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

    def human() -> None:
        for view in result.runs:
            run = view.run
            where = f"{run.host}:{run.pid}" if run.host else "-"
            state = f"DEAD ({view.dead})" if view.dead else run.status.value
            held = f" holds {len(view.leases)} lock(s)" if view.leases else ""
            click.echo(
                f"{run.run_id}  {run.flow:<16} {state:<12} {where:<24} "
                f"{run.started_at.isoformat(timespec='seconds')}{held}"
            )
        if any(view.dead for view in result.runs):
            click.echo(
                "dead runs hold their locks until `mempipe recover` (or the next job) closes them"
            )

    emit(result, as_json, human)


@click.command()
@store_options
@json_option
@reports_errors
def recover(store: str | None, config: str | None, store_secret: str | None, as_json: bool) -> None:
    """Close runs that died (their process is gone, or silent past the heartbeat limit): mark
    them failed and free their claims and locks now. Live runs are never touched."""
    from mempipe.bootstrap import load_context
    from mempipe.services.runs import recover_dead_runs

    context = load_context(store, config, store_secret)
    context.prepare_store()
    with context.unit_of_work() as uow:
        result = Recovery(store=uow.url, recovered=recover_dead_runs(uow))

    def human() -> None:
        for run in result.recovered:
            click.echo(
                f"{run.run_id} ({run.flow}) died: {run.reason}; marked failed, "
                f"freed {len(run.leases)} lock(s)"
            )
        click.echo(f"recovered {len(result.recovered)} dead run(s) in {result.store}")

    emit(result, as_json, human)
