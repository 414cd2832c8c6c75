"""Runs as the store records them: runs (list, with liveness), runs show (one run's summary,
a command's or a deployment's), runs cancel (a run's provider batches), recover (close dead
runs)."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import BaseModel, ConfigDict, Field

from mempipe.cli.options import counted, emit, json_option, reports_errors, store_options
from mempipe.schemas.batch import BatchStatus, ProviderBatch
from mempipe.schemas.run import RunRecord, RunStatus, WrittenFile
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


class Cancelled(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    run_id: str
    cancelled: list[str] = Field(description="the provider's ids of the batches cancelled")


class Recovery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    recovered: list[RecoveredRun]


@click.group(invoke_without_command=True)
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
@click.pass_context
@reports_errors
def runs(
    ctx: click.Context,
    store: str | None,
    config: str | None,
    store_secret: str | None,
    as_json: bool,
    running: bool,
    limit: int,
) -> None:
    """Recent runs, newest first: flow, status, host and pid, heartbeat, the locks each holds,
    and whether a run recorded as running is in fact dead (free it with `mempipe recover`).
    `runs show RUN` shows one run's outcome."""
    if ctx.invoked_subcommand:
        return
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
        if result.runs:
            click.echo(f"{'run':<36}  {'flow':<16} {'status':<12} {'host:pid':<24} started")
        else:
            click.echo("no runs recorded in this store yet")
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


@runs.command("show")
@click.argument("run_id", metavar="RUN")
@store_options
@json_option
@reports_errors
def show_run(
    run_id: str, store: str | None, config: str | None, store_secret: str | None, as_json: bool
) -> None:
    """One run's outcome as the store recorded it: flow, status, parameters, counts, error, and
    the files it wrote (the audit, rejects). RUN is the run id a command prints, which is also
    the Prefect flow run's id: `prefect deployment run ... --watch`, then this on its id."""
    from datetime import UTC, datetime

    from mempipe.bootstrap import load_context
    from mempipe.domain.liveness import death
    from mempipe.errors import ConfigError, StoreError

    try:
        with load_context(store, config, store_secret).unit_of_work(read_only=True) as uow:
            run = uow.runs.get_run(run_id)
            if run is None:
                raise ConfigError(f"no run {run_id!r} in {uow.url} (`mempipe runs` lists them)")
            files = [f for f in uow.files.written_files() if f.run_id == run_id]
            result = RunShown(
                store=uow.url,
                run=run,
                dead=death(run, datetime.now(UTC)),
                files=files,
                never_written=[f.path for f in files if not Path(f.path).exists()],
                batches=shown_batches(uow.batches.run_batches(run_id)),
            )
    except (ConfigError, StoreError) as missing:
        _show_prefect_record(run_id, missing, as_json)
        return

    def human() -> None:
        ended = run.finished_at.isoformat(timespec="seconds") if run.finished_at else "-"
        status = f"DEAD ({result.dead})" if result.dead else run.status.value
        click.echo(f"run {run.run_id}: {run.flow} {status}")
        click.echo(f"started {run.started_at.isoformat(timespec='seconds')}, ended {ended}")
        if run.parameters:
            shown = "; ".join(f"{k}: {_plain(v)}" for k, v in run.parameters.items())
            click.echo(f"parameters: {shown}")
        counts = counted(run.counts) or (
            "none recorded (the run failed before it counted its work; what it committed stays "
            "in the store: `mempipe stats`)"
            if run.status is RunStatus.FAILED
            else "none"
        )
        click.echo(f"counts: {counts}")
        if run.error:
            click.echo(f"error: {run.error}")
        for file in result.files:
            written = " (never written)" if file.path in result.never_written else ""
            click.echo(f"{file.kind.value}: {file.path}{written}")
        for batch in result.batches:
            click.echo(
                f"batch {batch.batch_id or batch.key}: {batch.status.value}, "
                f"{batch.requests} request(s) for {batch.scope}"
            )
        click.echo(f"store: {result.store}")

    emit(result, as_json, human)


def _show_prefect_record(run_id: str, missing: Exception, as_json: bool) -> None:
    """A run the store has no record of (it failed before it reached its store), as Prefect
    recorded it; the store's error where Prefect knows it no better."""
    from mempipe.cli.flow_runs import prefect_flow_run
    from mempipe.credentials import scrub

    recorded = prefect_flow_run(run_id)
    if recorded is None:
        raise missing

    def human() -> None:
        click.echo(f"run {run_id}: {recorded.flow} {(recorded.state or 'unknown').lower()}")
        click.echo(
            f"the store has no record of it ({missing}); Prefect's record at {recorded.api}:"
        )
        click.echo(f"started {recorded.start_time or '-'}, ended {recorded.end_time or '-'}")
        if recorded.parameters:
            shown = "; ".join(f"{k}: {_plain(v)}" for k, v in recorded.parameters.items())
            click.echo(f"parameters: {scrub(shown)}")
        if recorded.message:
            click.echo(f"error: {scrub(recorded.message)}")

    emit(recorded, as_json, human)


@runs.command("cancel")
@click.argument("run_id", metavar="RUN")
@store_options
@json_option
@reports_errors
def cancel_run(
    run_id: str, store: str | None, config: str | None, store_secret: str | None, as_json: bool
) -> None:
    """Cancel RUN's open provider batches (``--via batch``). The run, or the next one with the
    same command, applies what they finished; their other requests are left for a rerun."""
    from mempipe.adapters.llm.batches import OpenAIBatches
    from mempipe.bootstrap import load_context
    from mempipe.errors import ConfigError
    from mempipe.services.provider_batches import cancel_batches
    from mempipe.settings import load_llm_settings

    with load_context(store, config, store_secret).unit_of_work(existing=True) as uow:
        if uow.runs.get_run(run_id) is None:
            raise ConfigError(f"no run {run_id!r} in {uow.url} (`mempipe runs` lists them)")
        done = cancel_batches(uow.batches.run_batches(run_id), OpenAIBatches(load_llm_settings()))
        result = Cancelled(store=uow.url, run_id=run_id, cancelled=done)

    def human() -> None:
        click.echo(
            f"cancelled {len(result.cancelled)} batch(es) of run {run_id}"
            + (f": {', '.join(result.cancelled)}" if result.cancelled else "")
        )

    emit(result, as_json, human)


def _plain(value: object) -> str:
    """A parameter as words: a list as its items, not Python's repr of it."""
    if isinstance(value, list | tuple):
        return ", ".join(_plain(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in value.items())
    return str(value)


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
