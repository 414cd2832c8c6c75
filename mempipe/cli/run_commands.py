"""Runs as the store records them: runs (list, with liveness), runs show (one run's summary,
a command's or a deployment's), runs cancel (a run's provider batches), recover (close dead
runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from mempipe.cli.options import (
    counted,
    emit,
    store_command,
)
from mempipe.cli.runner import run_query
from mempipe.schemas.run import RunStatus

if TYPE_CHECKING:
    from mempipe.services.provider_batches import Cancelled
    from mempipe.services.runs import Recovery, RunList, RunShown


@click.group(invoke_without_command=True, short_help="Recent runs, newest first, and their locks.")
@store_command
@click.option("--running", is_flag=True, default=False, help="Only runs recorded as running.")
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="The newest this many runs.",
)
@click.pass_context
def runs(ctx: click.Context, **options: Any) -> None:
    """Recent runs, newest first: flow, status, host and pid, start time, the locks each holds,
    and whether a run recorded as running is in fact dead (free it with `mempipe recover`);
    `--json` adds each run's last heartbeat. `runs show RUN` shows one run's outcome."""
    from mempipe.services.runs import list_runs

    if not ctx.invoked_subcommand:
        run_query(list_runs, options, _show_runs)


def _show_runs(result: RunList) -> None:
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


@runs.command("show", short_help="One run's outcome as the store recorded it.")
@click.argument("run_id", metavar="RUN")
@store_command
def show_run(**options: Any) -> None:
    """One run's outcome as the store recorded it: flow, status, parameters, counts, error, and
    the files it wrote (the audit, rejects). RUN is the run id a command prints, which is also
    the Prefect flow run's id: `prefect deployment run ... --watch`, then this on its id."""
    from mempipe.errors import ConfigError, StoreError
    from mempipe.services.runs import show_run

    run_id, as_json = options["run_id"], options["as_json"]
    try:
        run_query(show_run, options, _show_run, priced=True)
    except (ConfigError, StoreError) as missing:
        _show_prefect_record(run_id, missing, as_json)


def _show_run(result: RunShown) -> None:
    run = result.run
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
    for row in result.spend:
        unreported = f", {row.unreported} without usage" if row.unreported else ""
        click.echo(
            f"spent: {row.day} {row.kind} {row.memory_type or 'all types'} {row.model} "
            f"({row.via}): {row.requests} request(s), {row.input_tokens:,} input and "
            f"{row.output_tokens:,} output tokens{unreported}, {_usd(row.usd)}"
        )
    if result.spend:
        click.echo(f"spent in all: {_usd(result.spend_usd)}")
    click.echo(f"store: {result.store}")


def _usd(value: float | None) -> str:
    return "unpriced (costs.prices)" if value is None else f"${value:.6f}"


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


@runs.command("cancel", short_help="Cancel a run's open provider batches.")
@click.argument("run_id", metavar="RUN")
@store_command
def cancel_run(**options: Any) -> None:
    """Cancel RUN's open provider batches (``--via batch``); RUN submits no more. The run, or
    the next one with the same command, applies what they finished; their other requests are
    left for a rerun."""
    from mempipe.services.provider_batches import cancel_run

    run_query(cancel_run, options, _show_cancelled, read_only=False, existing=True)


def _show_cancelled(result: Cancelled) -> None:
    click.echo(
        f"cancelled {len(result.cancelled)} batch(es) of run {result.run_id}"
        + (f": {', '.join(result.cancelled)}" if result.cancelled else "")
    )


def _plain(value: object) -> str:
    """A parameter as words: a list as its items, not Python's repr of it."""
    if isinstance(value, list | tuple):
        return ", ".join(_plain(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in value.items())
    return str(value)


@click.command(short_help="Close runs that died and free their locks.")
@store_command
def recover(**options: Any) -> None:
    """Close runs that died (their process is gone, or silent past the heartbeat limit): mark
    them failed and free their claims and locks now. Live runs are never touched."""
    from mempipe.services.runs import recover

    run_query(recover, options, _show_recovery, read_only=False, prepare=True)


def _show_recovery(result: Recovery) -> None:
    for run in result.recovered:
        click.echo(
            f"{run.run_id} ({run.flow}) died: {run.reason}; marked failed, "
            f"freed {len(run.leases)} lock(s)"
        )
    click.echo(f"recovered {len(result.recovered)} dead run(s) in {result.store}")
