"""Extraction replay and its audit: replay, report."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from mempipe.adapters.llm.registry import extractor_names
from mempipe.cli.flow_runs import starts_flows
from mempipe.cli.options import (
    counts_text,
    emit,
    json_option,
    reports_errors,
    run_flow,
    scale_out_options,
    store_options,
)
from mempipe.cli.plans import plan_option, via_option
from mempipe.schemas.selection import SnapshotSelection


@click.command()
@click.option("--org-id", default=None, help="Only snapshots of this org.")
@click.option("--project-id", default=None, help="Only snapshots of this project.")
@click.option("--user-id", default=None, help="Only snapshots of this user.")
@click.option("--session-id", default=None, help="Only snapshots of this session.")
@click.option("--snapshot-id", "snapshot_ids", multiple=True, help="Only these snapshots.")
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
@click.option("--force", is_flag=True, help="Run extractions already done again.")
@click.option("--audit-dir", default="audit", show_default=True, help="Parquet audit folder.")
@via_option
@plan_option
@store_options
@json_option
@reports_errors
@starts_flows
def replay(
    org_id: str | None,
    project_id: str | None,
    user_id: str | None,
    session_id: str | None,
    snapshot_ids: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    handlers: str | None,
    extractor: str,
    concurrency: int,
    task_runner: str,
    dask_address: str | None,
    force: bool,
    audit_dir: str,
    via: str,
    plan: bool,
    store: str | None,
    config: str | None,
    store_secret: str | None,
    as_json: bool,
) -> None:
    """Replay snapshot extraction: every selected handler on every selected snapshot,
    reconciled (ADD / UPDATE / REINFORCE) and audited. Resumable."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.replay import replay_flow
    from mempipe.progress import show_on_terminal

    context = load_context(store, config, store_secret)
    chosen = [h.strip() for h in handlers.split(",")] if handlers else None
    selection = SnapshotSelection(
        org_id=org_id,
        project_id=project_id,
        user_id=user_id,
        session_id=session_id,
        snapshot_ids=list(snapshot_ids) or None,
        since=since,
        until=until,
    )
    if plan:
        from mempipe.adapters.llm.registry import extractor_for
        from mempipe.cli.plans import emit_plan
        from mempipe.services.plans import replay_plan
        from mempipe.settings import load_batch_limits

        settings = context.replay_settings(extractor)
        enabled = chosen or [t.value for t in context.config.memory.extraction.enabled]
        with context.unit_of_work(read_only=True, existing=True) as uow:
            found = replay_plan(
                uow,
                selection,
                enabled,
                force=force,
                extractor=extractor,
                summaries=extractor_for(extractor, settings.llm).capabilities.summaries,
                via=via,  # type: ignore[arg-type]
                costs=context.config.costs,
                llm=settings.llm,
                limits=load_batch_limits(),
            )
        emit_plan(found, as_json)
        return
    context.prepare_store()
    with show_on_terminal():
        summary, incomplete = run_flow(
            replay_flow,
            **dict(selection),
            handlers=chosen,
            extractor=extractor,
            via=via,
            concurrency=concurrency,
            task_runner=task_runner,
            dask_address=dask_address,
            force=force,
            **context.flow_options(),
            audit_dir=audit_dir,
        )

    def human() -> None:
        click.echo(
            f"replay {summary.run_id}: {summary.extractions} extractions of "
            f"{summary.snapshots} snapshots ({summary.done} done, {summary.failed_retryable} "
            f"failed retryably, {summary.failed_content} failed on content)"
        )
        click.echo(
            f"memories: {summary.added} added, {summary.updated} updated, "
            f"{summary.reinforced} reinforced, {summary.unembedded} without a vector"
        )
        if summary.done_elsewhere:
            click.echo(f"done by another replay meanwhile: {summary.done_elsewhere}")
        if summary.erased_meanwhile:
            click.echo(f"owner erased meanwhile, nothing written: {summary.erased_meanwhile}")
        if not summary.extractions:
            click.echo(
                "nothing to extract: no snapshot is pending extraction. `mempipe backfill "
                "ARCHIVE` brings conversations in first; `mempipe replay --force` extracts "
                "done snapshots again"
            )
            return
        where = Path(summary.audit_dir).resolve()
        click.echo(f"audit: {where} ({len(summary.audit_files)} Parquet file(s))")
        click.echo(f"next: `mempipe report --run-id {summary.run_id}` summarises it")

    emit(summary, as_json, human, incomplete)


@click.command()
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
@store_options
@json_option
@reports_errors
@starts_flows
def report(
    run_id: str | None,
    since: datetime | None,
    until: datetime | None,
    last_days: int | None,
    by: str,
    out: str,
    html: str | None,
    store: str | None,
    config: str | None,
    store_secret: str | None,
    as_json: bool,
) -> None:
    """Write the audit (one row per ADD / UPDATE / REINFORCE) as Parquet partitioned by day,
    and summarise it by memory type and action, with failures by class."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.report import audit_report_flow

    context = load_context(store, config, store_secret)
    context.unit_of_work(read_only=True).close()
    summary = audit_report_flow(
        run_id=run_id,
        since=since.date() if since else None,
        until=until.date() if until else None,
        last_days=last_days,
        by=by,
        out=out,
        html=html,
        **context.flow_options(),
    )

    def human() -> None:
        click.echo(
            f"audit: {summary.rows} rows in {len(summary.files)} file(s) under "
            f"{Path(summary.out).resolve()}"
        )
        for row in summary.actions:
            click.echo(f"  {row.memory_type:<11} {row.action:<9} {row.count}")
        click.echo(f"failures: {counts_text(summary.failures)}")
        if summary.html:
            click.echo(f"page: {summary.html}")

    emit(summary, as_json, human)
