"""Commands on the store itself: init, migrate, stats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from mempipe.cli.options import (
    counts_text,
    emit,
    store_command,
)
from mempipe.cli.runner import run_query

if TYPE_CHECKING:
    from mempipe.schemas.summaries import MigrationReport, StoreStats


@click.command(short_help="Create an empty store, every migration applied.")
@store_command
def init(store: str | None, config: str | None, store_secret: str | None, as_json: bool) -> None:
    """Create an empty store: every migration applied, the project's declarations recorded.
    A store that is there already is only brought up to date. Every other command that works
    on a store refuses one that is not there (a typo'd path is an error, never a new store);
    init makes a new SQLite file's missing folder."""
    from mempipe.adapters.store.factory import make_room
    from mempipe.adapters.store.unit_of_work import unit_of_work
    from mempipe.bootstrap import load_context
    from mempipe.services.store import create

    context = load_context(store, config, store_secret)
    folder = make_room(context.store_url)
    with unit_of_work(context.store_url) as uow:
        report = create(uow)
    report.folder_created = folder
    context.prepare_store()  # the declarations and the server's capabilities
    emit(report, as_json, lambda: _show_init(report))


def _show_init(report: MigrationReport) -> None:
    if report.folder_created:
        click.echo(f"made the folder {report.folder_created}")
    if report.already_applied:
        applied = ", ".join(report.applied) or "nothing (up to date)"
        click.echo(f"store exists; applied: {applied}")
    else:
        click.echo(f"created an empty store ({len(report.applied)} migrations applied)")
    click.echo(f"store: {report.store}")


@click.command(short_help="Apply an existing store's pending migrations.")
@store_command
@click.option(
    "--pending", is_flag=True, default=False, help="Only list what is not applied; change nothing."
)
def migrate(**options: Any) -> None:
    """Apply an existing store's pending migrations (idempotent). A store that is not there is
    refused; `mempipe init` creates one."""
    from mempipe.services.store import migrate

    pending = options["pending"]
    run_query(
        migrate, options, lambda r: _show_migrated(r, pending), read_only=False, existing=True
    )


def _show_migrated(report: MigrationReport, pending: bool) -> None:
    if pending:
        click.echo(f"pending: {', '.join(report.pending) or 'none'}")
    else:
        click.echo(f"applied: {', '.join(report.applied) or 'nothing (up to date)'}")
    click.echo(f"store: {report.store}")


@click.command(short_help="Counts of what the store holds.")
@click.option(
    "--check",
    is_flag=True,
    default=False,
    help="Run the store's full integrity check first (SQLite's integrity_check); "
    "exit 1 naming what it finds.",
)
@store_command
def stats(**options: Any) -> None:
    """Counts of turns, sessions, snapshots by state, memories by type, failures and runs."""
    from mempipe.services.store import stats

    run_query(stats, options, _show_stats)


def _show_stats(result: StoreStats) -> None:
    click.echo(f"store: {result.store}")
    click.echo(
        f"turns: {result.turns} ({result.unpromoted_turns} unpromoted) "
        f"in {result.sessions} sessions"
    )
    click.echo(f"snapshots: {result.snapshots.get('total', 0)} ({counts_text(result.snapshots)})")
    click.echo(
        "memories (active/superseded): "
        + ", ".join(
            f"{kind} {counts.get('active', 0)}/{counts.get('superseded', 0)}"
            for kind, counts in result.memories.items()
        )
    )
    click.echo(f"failures: {counts_text(result.failures)}")
    click.echo(f"runs: {counts_text(result.runs) or 'none'}")
    if result.integrity is not None:
        click.echo("integrity: ok (SQLite's integrity_check found nothing wrong)")
