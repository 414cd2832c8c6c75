"""Loading archives and promoting sessions: backfill, promote."""

from __future__ import annotations

from contextlib import nullcontext

import click

from mempipe.archives.registry import format_names
from mempipe.cli.flow_runs import starts_flows, starts_flows_creating_store
from mempipe.cli.options import (
    emit,
    identity_options,
    json_option,
    pairs,
    rejects_dir_option,
    reports_errors,
    run_flow,
    store_options,
)
from mempipe.cli.plans import plan_option
from mempipe.errors import StoreError


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "archive_format",
    type=click.Choice(format_names()),
    default="auto",
    show_default=True,
    help="Archive format; auto detects it per file.",
)
@identity_options
@click.option(
    "--column",
    "columns",
    multiple=True,
    metavar="FIELD=COLUMN",
    help="For CSV and Parquet: the column holding a turn field (repeatable).",
)
@click.option(
    "--batch-size",
    default=5000,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Turns written per transaction (small files share one up to this many).",
)
@rejects_dir_option
@click.option("--no-promote", is_flag=True, help="Load turns only; promote later with `promote`.")
@click.option(
    "--future-margin",
    default="1d",
    show_default=True,
    help="How far after the run a turn time may lie (30m, 12h, 2d); later ones are rejects.",
)
@click.option(
    "--embed",
    is_flag=True,
    help="Give the new turns vectors of the serving model in the same run (as reembed "
    "--incremental does), so search by meaning finds them at once.",
)
@click.option(
    "--allow-any-time",
    is_flag=True,
    help="Take turn times before 1970 or past the future margin as they are.",
)
@plan_option
@store_options
@json_option
@reports_errors
@starts_flows_creating_store
def backfill(
    paths: tuple[str, ...],
    archive_format: str,
    org_id: str | None,
    project_id: str | None,
    user_id: str | None,
    agent_id: str | None,
    columns: tuple[str, ...],
    batch_size: int,
    rejects_dir: str,
    no_promote: bool,
    future_margin: str,
    embed: bool,
    allow_any_time: bool,
    plan: bool,
    store: str | None,
    config: str | None,
    store_secret: str | None,
    as_json: bool,
) -> None:
    """Load transcript archives (files, directories, globs) as turns, then promote sessions
    into snapshots. Bad records go to a rejects file; re-running adds nothing."""
    from mempipe.archives import expand_paths
    from mempipe.bootstrap import load_context
    from mempipe.cli.options import duration
    from mempipe.flows.backfill import backfill_flow
    from mempipe.progress import show_on_terminal

    column_map = pairs(columns, "--column")
    context = load_context(store, config, store_secret)
    found = expand_paths(paths)
    if plan:
        from mempipe.cli.plans import emit_plan
        from mempipe.services.plans import archive_texts, backfill_plan
        from mempipe.settings import load_llm_settings

        if not embed:
            raise click.UsageError("--plan counts what --embed would send: give both")
        defaults = context.identity_defaults(org_id, project_id, user_id, agent_id)
        texts = archive_texts(found, archive_format, defaults, column_map)
        try:
            uow = context.unit_of_work(read_only=True, existing=True)
        except StoreError:  # no store yet: the configured model embeds
            uow = None
        with uow if uow is not None else nullcontext():
            estimate = backfill_plan(
                uow,
                context.store_url,
                texts,
                context.config.memory.embedding.model,
                context.config.costs,
                load_llm_settings(),
            )
        emit_plan(estimate, as_json)
        return
    context.prepare_store(create=True)
    with show_on_terminal():
        summary, incomplete = run_flow(
            backfill_flow,
            paths=list(paths),
            format=archive_format,
            org_id=org_id,
            project_id=project_id,
            user_id=user_id,
            agent_id=agent_id,
            columns=column_map,
            **context.flow_options(),
            batch_size=batch_size,
            rejects_dir=rejects_dir,
            promote_sessions=not no_promote,
            future_margin=duration(future_margin, "--future-margin"),
            allow_any_time=allow_any_time,
            embed=embed,
        )

    def human() -> None:
        click.echo(
            f"backfill {summary.run_id}: {len(summary.files)} file(s), "
            f"{summary.turns_inserted} turns inserted, "
            f"{summary.duplicates_skipped} duplicates skipped, {summary.rejected} rejected, "
            f"{summary.skipped_empty} empty messages skipped"
            + (f", {summary.skipped_erased} of erased users" if summary.skipped_erased else "")
        )
        for file in [f for f in summary.files if f.failed]:
            click.echo(
                f"failed: {file.path}: {(file.failed or '').removeprefix('whole file rejected: ')}"
            )
        if summary.rejects_path:
            click.echo(f"rejects: {summary.rejects_path}")
        click.echo(
            f"promoted {summary.turns_promoted} turns of {summary.sessions} sessions "
            f"into {summary.snapshots_created} snapshots"
        )
        click.echo(f"store: {summary.store}")
        if summary.embedded is not None:
            click.echo(f"embedded {summary.embedded} turns with {summary.embedding_model}")
        elif summary.turns_inserted:
            click.echo(
                "turns are searched by text now; for search by meaning, embed them: "
                "`mempipe reembed --incremental` (or backfill with --embed)"
            )
        if summary.snapshots_created:
            click.echo("next: `mempipe replay` extracts long-term memories from the new snapshots")

    emit(summary, as_json, human, incomplete)


@click.command()
@store_options
@json_option
@reports_errors
@starts_flows
def promote(store: str | None, config: str | None, store_secret: str | None, as_json: bool) -> None:
    """Cut every session's unpromoted turns into snapshots, by the configured limits."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.promote import promote_flow
    from mempipe.progress import show_on_terminal

    context = load_context(store, config, store_secret)
    context.prepare_store()
    with show_on_terminal():
        summary = promote_flow(
            **context.flow_options(),
        )

    def human() -> None:
        cuts = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in summary.by_reason.items())
        click.echo(
            f"promoted {summary.turns_promoted} turns of {summary.sessions} sessions "
            f"into {summary.snapshots_created} snapshots" + (f" (cut at: {cuts})" if cuts else "")
        )

    emit(summary, as_json, human)
