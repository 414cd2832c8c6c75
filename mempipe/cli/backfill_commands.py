"""Loading archives and promoting sessions: backfill, promote."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from mempipe.archives.registry import format_names
from mempipe.cli.options import (
    duration,
    identity_options,
    pairs,
    partitions_option,
    plan_option,
    rejects_dir_option,
    scale_out_options,
    store_command,
)
from mempipe.cli.runner import run_job
from mempipe.schemas.summaries import users_line

if TYPE_CHECKING:
    from mempipe.schemas.summaries import BackfillSummary, PromotionSummary


@click.command(short_help="Load transcript archives as turns, then promote them.")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "format",
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
    default=None,
    callback=lambda _, param, value: pairs(value, "--column"),
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
@click.option(
    "--no-promote",
    "promote_sessions",
    is_flag=True,
    flag_value=False,
    default=True,
    help="Load turns only; promote later with `promote`.",
)
@click.option(
    "--future-margin",
    default="1d",
    callback=lambda _, param, value: duration(value, "--future-margin"),
    show_default=True,
    help="How far after the run a turn time may lie (30m, 12h, 2d); later ones are rejects.",
)
@click.option(
    "--embed",
    is_flag=True,
    default=False,
    help="Give the new turns vectors of the serving model in the same run (as reembed "
    "--incremental does), so search by meaning finds them at once.",
)
@partitions_option("Groups of files read at once (on threads, or one Dask worker each).")
@scale_out_options
@click.option(
    "--allow-any-time",
    is_flag=True,
    default=False,
    help="Take turn times before 1970 or past the future margin as they are.",
)
@plan_option
@store_command
def backfill(**options: Any) -> None:
    """Load transcript archives (files, directories, globs) as turns, then promote sessions
    into snapshots. Bad records go to a rejects file; re-running adds nothing."""
    from mempipe.flows.backfill import Backfill

    if options["plan"] and not options["embed"]:
        raise click.UsageError("--plan counts what --embed would send: give both")
    run_job(Backfill, options, _show_backfill)


def _show_backfill(summary: BackfillSummary, incomplete: bool) -> None:
    click.echo(
        f"backfill {summary.run_id}: {summary.files_read} file(s), "
        f"{summary.turns_inserted} turns inserted, "
        f"{summary.duplicates_skipped} duplicates skipped, {summary.rejected} rejected, "
        f"{summary.skipped_empty} empty messages skipped"
        + (f", {summary.skipped_erased} of erased users" if summary.skipped_erased else "")
    )
    failed = [f for f in summary.files if f.failed]
    for file in failed:
        click.echo(
            f"failed: {file.path}: {(file.failed or '').removeprefix('whole file rejected: ')}"
        )
    if len(summary.failed_files) > len(failed):
        click.echo(f"failed: {len(summary.failed_files) - len(failed)} more: --json lists them")
    click.echo(users_line(summary.users, "turn", "turns"))
    if summary.identity_conflicts:
        click.echo(
            f"{summary.identity_conflicts} rejected carry an id of their own that differs from "
            "the one named: --identity record keeps theirs, --identity command writes yours"
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


@click.command(short_help="Cut unpromoted turns into session snapshots.")
@store_command
def promote(**options: Any) -> None:
    """Cut every session's unpromoted turns into snapshots, by the configured limits."""
    from mempipe.flows.promote import Promote

    run_job(Promote, options, _show_promote)


def _show_promote(summary: PromotionSummary, incomplete: bool) -> None:
    cuts = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in summary.by_reason.items())
    click.echo(
        f"promoted {summary.turns_promoted} turns of {summary.sessions} sessions "
        f"into {summary.snapshots_created} snapshots" + (f" (cut at: {cuts})" if cuts else "")
    )
