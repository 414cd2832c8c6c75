"""Commands on the store itself: init, migrate, stats."""

from __future__ import annotations

import click

from mempipe.cli.options import (
    counts_text,
    emit,
    json_option,
    reports_errors,
    store_options,
)


@click.command()
@store_options
@json_option
@reports_errors
def init(store: str | None, config: str | None, store_secret: str | None, as_json: bool) -> None:
    """Create an empty store: every migration applied, the project's declarations recorded.
    A store that is there already is only brought up to date. Every other command that works
    on a store refuses one that is not there (a typo'd path is an error, never a new store)."""
    from mempipe import migrations
    from mempipe.bootstrap import load_context

    context = load_context(store, config, store_secret)
    with context.unit_of_work() as uow:
        report = migrations.migrate(uow.schema)
    context.prepare_store()  # the declarations and the server's capabilities

    def human() -> None:
        if report.already_applied:
            applied = ", ".join(report.applied) or "nothing (up to date)"
            click.echo(f"store exists; applied: {applied}")
        else:
            click.echo(f"created an empty store ({len(report.applied)} migrations applied)")
        click.echo(f"store: {report.store}")

    emit(report, as_json, human)


@click.command()
@store_options
@json_option
@click.option("--pending", is_flag=True, help="Only list what is not applied; change nothing.")
@reports_errors
def migrate(
    store: str | None, config: str | None, store_secret: str | None, as_json: bool, pending: bool
) -> None:
    """Apply an existing store's pending migrations (idempotent). A store that is not there is
    refused; `mempipe init` creates one."""
    from mempipe import migrations
    from mempipe.bootstrap import load_context
    from mempipe.schemas.summaries import MigrationReport

    context = load_context(store, config, store_secret)
    uow = context.unit_of_work(existing=True)
    try:
        if pending:
            report = MigrationReport(
                store=uow.url,
                already_applied=uow.schema.applied_migrations(),
                pending=[m.id for m in migrations.pending(uow.schema)],
            )
        else:
            report = migrations.migrate(uow.schema)
    finally:
        uow.close()

    def human() -> None:
        if pending:
            click.echo(f"pending: {', '.join(report.pending) or 'none'}")
        else:
            click.echo(f"applied: {', '.join(report.applied) or 'nothing (up to date)'}")
        click.echo(f"store: {report.store}")

    emit(report, as_json, human)


@click.command()
@click.option(
    "--check",
    is_flag=True,
    help="Run the store's full integrity check first (SQLite's integrity_check); "
    "exit 1 naming what it finds.",
)
@store_options
@json_option
@reports_errors
def stats(
    check: bool, store: str | None, config: str | None, store_secret: str | None, as_json: bool
) -> None:
    """Counts of turns, sessions, snapshots by state, memories by type, failures and runs."""
    from mempipe.bootstrap import load_context
    from mempipe.errors import StoreDamagedError

    with load_context(store, config, store_secret).unit_of_work(read_only=True) as uow:
        problems = uow.schema.check_integrity(full=True) if check else None
        if problems:
            raise StoreDamagedError(uow.url, "; ".join(problems[:5]))
        result = uow.schema.stats()
        result.integrity = problems

    def human() -> None:
        click.echo(f"store: {result.store}")
        click.echo(
            f"turns: {result.turns} ({result.unpromoted_turns} unpromoted) "
            f"in {result.sessions} sessions"
        )
        click.echo(
            f"snapshots: {result.snapshots.get('total', 0)} ({counts_text(result.snapshots)})"
        )
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

    emit(result, as_json, human)
