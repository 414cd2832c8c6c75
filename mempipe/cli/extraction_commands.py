"""Extraction replay and its audit: replay, report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mempipe.adapters.llm.registry import extractor_names
from mempipe.cli.options import (
    audit_dir_option,
    counts_text,
    plan_option,
    scale_out_options,
    seed_option,
    store_command,
    via_option,
)
from mempipe.cli.runner import run_job

if TYPE_CHECKING:
    from mempipe.schemas.replay import ReplayPreview, ReplaySummary
    from mempipe.schemas.report import ReportSummary


@click.command(short_help="Replay extraction: extract, reconcile, audit.")
@click.option("--org-id", default=None, help="Only snapshots of this org.")
@click.option("--project-id", default=None, help="Only snapshots of this project.")
@click.option("--user-id", default=None, help="Only snapshots of this user.")
@click.option("--session-id", default=None, help="Only snapshots of this session.")
@click.option(
    "--snapshot-id", "snapshot_ids", multiple=True, default=None, help="Only these snapshots."
)
@click.option("--since", type=click.DateTime(), default=None, help="Snapshots ending from then.")
@click.option("--until", type=click.DateTime(), default=None, help="Snapshots starting before.")
@click.option(
    "--handlers",
    default=None,
    metavar="LIST",
    help="Comma-separated handlers (default: the enabled ones).",
)
@click.option(
    "--extractor",
    type=click.Choice(extractor_names()),
    default="offline",
    show_default=True,
    help="offline: rule-based, no network; openai: any OpenAI-compatible endpoint.",
)
@click.option(
    "--concurrency",
    default=4,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Partitions of the work (by project, then owner-id ranges) run at once.",
)
@scale_out_options
@click.option("--force", is_flag=True, default=False, help="Run extractions already done again.")
@click.option(
    "--stale",
    is_flag=True,
    default=False,
    help="Also run again the done extractions whose extractor or prompt differs from the "
    "configured one.",
)
@audit_dir_option
@click.option(
    "--sample",
    type=click.IntRange(1),
    default=None,
    help="Only N of the selected snapshots, drawn with --seed (the same N while the store's "
    "snapshots are the same: a preview's, then the replay's).",
)
@seed_option
@click.option(
    "--preview",
    is_flag=True,
    default=False,
    help="Write nothing: extract the selection with the configured extraction, reconcile it "
    "against the store in a transaction that is rolled back, and print the ADD / UPDATE / "
    "REINFORCE a replay would make, with texts before and after. A provider's answers are "
    "kept for the replay that follows.",
)
@click.option(
    "--html",
    is_flag=True,
    default=False,
    help="With --preview: also draw it as a page (in the kept answers' folder, which an erase "
    "reaches).",
)
@via_option
@plan_option
@store_command
def replay(**options: Any) -> None:
    """Replay snapshot extraction: every selected handler on every selected snapshot,
    reconciled (ADD / UPDATE / REINFORCE) and audited. Resumable."""
    from mempipe.flows.replay import Replay

    run_job(Replay, options, _show_replay, show_preview=_show_preview)


def _show_preview(preview: ReplayPreview) -> None:
    versions = ", ".join(
        f"{handler} {v.extractor}" + (f" (prompt {v.prompt_version})" if v.prompt_version else "")
        for handler, v in sorted(preview.extraction.items())
    )
    click.echo(
        f"preview of {preview.extractions} extractions of {len(preview.snapshot_ids)} "
        f"snapshot(s) on {preview.store}; nothing was written"
    )
    click.echo(f"extraction: {versions}")
    if preview.note:
        click.echo(preview.note)
    rows = [("memory type", "ADD", "UPDATE", "REINFORCE", "no longer found")]
    rows += [
        (c.memory_type, *map(str, (c.added, c.updated, c.reinforced, c.no_longer_found)))
        for c in [*preview.counts, preview.total]
    ]
    for row in rows:
        click.echo(
            f"  {row[0]:<12}" + "".join(f"{cell:>10}" for cell in row[1:4]) + f"{row[4]:>17}"
        )
    for change in preview.changes:
        click.echo(
            f"{change.action.value:<9} {change.memory_type} {change.memory_id} v{change.version}"
        )
        if change.before is not None:
            click.echo(f"  before: {change.before}")
        click.echo(f"  after:  {change.after}")
    for lost in preview.no_longer_found:
        click.echo(f"NOT FOUND {lost.memory_type} {lost.memory_id}: {lost.text}")
    if preview.failed:
        click.echo(f"failed: {preview.failed} extraction(s)")
        for failure in preview.failures:
            click.echo(f"  {failure}")
    if preview.erased_meanwhile:
        click.echo(
            f"owner erased meanwhile: {preview.erased_meanwhile} extraction(s) not previewed, "
            "nothing of theirs kept"
        )
    click.echo(
        f"provider: {preview.requests} question(s) asked, {preview.reused} answered from kept "
        f"answers, {preview.kept} kept for the replay"
    )
    for spent in preview.spent:
        click.echo(
            f"  spent on {spent.kind} {spent.memory_type or 'all types'} ({spent.model}): "
            f"{spent.requests} request(s), {spent.input_tokens:,} in / "
            f"{spent.output_tokens:,} out tokens"
        )
    plan = preview.plan
    click.echo(
        f"the full replay: {plan.requests:,} requests, {plan.input_tokens:,} input and "
        f"{plan.output_tokens:,} output tokens expected (`--plan` details it)"
    )
    if preview.html:
        click.echo(f"page: {preview.html}")


def _show_replay(summary: ReplaySummary, incomplete: bool) -> None:
    click.echo(
        f"replay {summary.run_id}: {summary.extractions} extractions of "
        f"{summary.snapshots} snapshots ({summary.done} done, {summary.failed_retryable} "
        f"failed retryably, {summary.failed_content} failed on content)"
    )
    click.echo(
        f"memories: {summary.added} added, {summary.updated} updated, "
        f"{summary.reinforced} reinforced, {summary.unembedded} without a vector"
    )
    if summary.summaries:
        click.echo(f"sessions summarized by {summary.extractor}: {summary.summaries}")
    if summary.pending:
        click.echo(
            f"stopped: {summary.pending} extraction(s) still pending; the same command again "
            "goes on from there"
        )
    if summary.done_elsewhere:
        click.echo(f"done by another replay meanwhile: {summary.done_elsewhere}")
    if summary.erased_meanwhile:
        click.echo(f"owner erased meanwhile, nothing written: {summary.erased_meanwhile}")
    if not summary.extractions and not summary.pending:
        click.echo(
            "nothing to extract: no snapshot is pending extraction. A backfill brings "
            "conversations in first; `mempipe replay --force` extracts done snapshots again"
        )
        return
    where = Path(summary.audit_dir).resolve()
    click.echo(f"audit: {where} ({len(summary.audit_files)} Parquet file(s))")
    click.echo(f"next: `mempipe report --run-id {summary.run_id}` summarises it")


@click.command(short_help="Write and summarise the Parquet audit.")
@click.option("--run-id", default=None, help="The audit of one run.")
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), default=None, help="From this day.")
@click.option("--until", type=click.DateTime(["%Y-%m-%d"]), default=None, help="To this day.")
@click.option(
    "--last-days",
    type=click.IntRange(1, 366),
    default=None,
    help="The last N complete UTC days (1: yesterday).",
)
@click.option(
    "--by",
    type=click.Choice(["applied", "observed"]),
    default="applied",
    show_default=True,
    help="The days are those the changes were applied (the runs') or those their evidence was "
    "observed (the snapshots' times).",
)
@click.option("--out", default="audit", show_default=True, help="Where the Parquet goes.")
@click.option(
    "--html",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write one self-contained page of charts (opens offline in any browser).",
)
@store_command
def report(**options: Any) -> None:
    """Write the audit (one row per ADD / UPDATE / REINFORCE) as Parquet partitioned by day,
    and summarise it by memory type and action, with failures by class."""
    from mempipe.flows.report import Report

    run_job(Report, options, _show_report)


def _show_report(summary: ReportSummary, incomplete: bool) -> None:
    click.echo(
        f"audit: {summary.rows} rows in {len(summary.files)} file(s) under "
        f"{Path(summary.out).resolve()}"
    )
    for row in summary.actions:
        click.echo(f"  {row.memory_type:<11} {row.action:<9} {row.count}")
    click.echo(f"failures: {counts_text(summary.failures)}")
    for spent in summary.spend:
        usd = "unpriced" if spent.usd is None else f"${spent.usd:.6f}"
        click.echo(
            f"  spent {spent.day} {spent.kind:<10} {spent.memory_type or 'all types':<11} "
            f"{spent.model} ({spent.via}): {spent.requests} request(s), "
            f"{spent.input_tokens:,} in / {spent.output_tokens:,} out tokens, {usd}"
        )
    if summary.html:
        click.echo(f"page: {summary.html}")
