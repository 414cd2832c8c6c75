"""The ``mempipe`` command line: thin kebab-case commands, each calling one flow or store method.

``--json`` prints exactly one JSON document on stdout; logs and progress go to stderr.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from contextlib import closing
from datetime import datetime
from typing import Any, TypeVar

import click
from pydantic import BaseModel

from mempipe import __version__
from mempipe.errors import MempipeError

F = TypeVar("F", bound=Callable[..., Any])

# A laptop run starts Prefect's temporary local server; it needs no usage telemetry.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def store_options(command: F) -> F:
    """``--store`` and ``--config``, shared by every command."""
    command = click.option(
        "--config",
        "config",
        type=click.Path(dir_okay=False),
        default=None,
        help="project-config.yaml to read (env MEMPIPE_CONFIG; default ./project-config.yaml).",
    )(command)
    return click.option(
        "--store",
        "store",
        default=None,
        metavar="URL",
        help="Store URL, e.g. sqlite:///path/to/memory.db (env MEMPIPE_STORE; "
        "default sqlite:///mempipe.db).",
    )(command)


def json_option(command: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
    )(command)


def identity_options(command: F) -> F:
    for name, what in reversed(
        [("org-id", "org"), ("project-id", "project"), ("user-id", "user"), ("agent-id", "agent")]
    ):
        command = click.option(
            f"--{name}", default=None, help=f"Default {what} for records that carry none."
        )(command)
    return command


def reports_errors(command: F) -> F:
    """Turn mempipe's errors into one clear line on stderr and exit status 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MempipeError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def emit(result: BaseModel, as_json: bool, human: Callable[[], None]) -> None:
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        human()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mempipe")
def cli() -> None:
    """mempipe: the ops-side data pipeline of an agent-memory store."""


@cli.command()
@store_options
@json_option
@click.option("--pending", is_flag=True, help="Only list what is not applied; change nothing.")
@reports_errors
def migrate(store: str | None, config: str | None, as_json: bool, pending: bool) -> None:
    """Apply the store's pending migrations (idempotent)."""
    from mempipe import migrations
    from mempipe.bootstrap import load_context
    from mempipe.schemas.summaries import MigrationReport

    context = load_context(store, config)
    opened = context.open_store(migrate=False)
    try:
        if pending:
            report = MigrationReport(
                store=opened.url,
                already_applied=opened.applied_migrations(),
                pending=[m.id for m in migrations.pending(opened)],
            )
        else:
            report = migrations.migrate(opened)
    finally:
        opened.close()

    def human() -> None:
        if pending:
            click.echo(f"pending: {', '.join(report.pending) or 'none'}")
        else:
            click.echo(f"applied: {', '.join(report.applied) or 'nothing (up to date)'}")
        click.echo(f"store: {report.store}")

    emit(report, as_json, human)


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "archive_format",
    type=click.Choice(
        ["auto", "turns", "openai", "chatgpt", "claude", "sharegpt", "csv", "parquet"]
    ),
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
@click.option("--batch-size", default=5000, show_default=True, type=click.IntRange(1, 100_000))
@click.option(
    "--rejects-dir",
    default="mempipe-rejects",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the rejects file of the run is written (only when something is rejected).",
)
@click.option("--no-promote", is_flag=True, help="Load turns only; promote later with `promote`.")
@store_options
@json_option
@reports_errors
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
    store: str | None,
    config: str | None,
    as_json: bool,
) -> None:
    """Load transcript archives (files, directories, globs) as turns, then promote sessions
    into snapshots. Bad records go to a rejects file; re-running adds nothing."""
    from mempipe.archives import expand_paths
    from mempipe.bootstrap import load_context
    from mempipe.flows.backfill import backfill as backfill_flow
    from mempipe.progress import show_on_terminal

    column_map = _pairs(columns, "--column")
    context = load_context(store, config)
    context.open_store().close()
    expand_paths(paths)
    with show_on_terminal():
        summary = backfill_flow(
            paths=list(paths),
            format=archive_format,
            org_id=org_id,
            project_id=project_id,
            user_id=user_id,
            agent_id=agent_id,
            columns=column_map,
            store=context.store_url,
            config=str(context.settings.config),
            batch_size=batch_size,
            rejects_dir=rejects_dir,
            promote_sessions=not no_promote,
        )

    def human() -> None:
        click.echo(
            f"backfill {summary.run_id}: {len(summary.files)} file(s), "
            f"{summary.turns_inserted} turns inserted, "
            f"{summary.duplicates_skipped} duplicates skipped, {summary.rejected} rejected"
        )
        if summary.rejects_path:
            click.echo(f"rejects: {summary.rejects_path}")
        click.echo(
            f"promoted {summary.turns_promoted} turns of {summary.sessions} sessions "
            f"into {summary.snapshots_created} snapshots"
        )
        click.echo(f"store: {summary.store}")

    emit(summary, as_json, human)


def _pairs(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value:
            raise click.BadParameter(f"{pair!r}: expected NAME=VALUE", param_hint=option)
        mapping[name.strip()] = value.strip()
    return mapping


@cli.command()
@store_options
@json_option
@reports_errors
def promote(store: str | None, config: str | None, as_json: bool) -> None:
    """Cut every session's unpromoted turns into snapshots, by the configured limits."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.promote import promote_flow
    from mempipe.progress import show_on_terminal

    context = load_context(store, config)
    context.open_store().close()
    with show_on_terminal():
        summary = promote_flow(store=context.store_url, config=str(context.settings.config))

    def human() -> None:
        click.echo(
            f"promoted {summary.turns_promoted} turns of {summary.sessions} sessions "
            f"into {summary.snapshots_created} snapshots {summary.by_reason}"
        )

    emit(summary, as_json, human)


@cli.command()
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
    type=click.Choice(["offline", "openai"]),
    default="offline",
    show_default=True,
    help="offline: rule-based, no network; openai: any OpenAI-compatible endpoint.",
)
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64))
@click.option("--force", is_flag=True, help="Run extractions already done again.")
@click.option("--audit-dir", default="audit", show_default=True, help="Parquet audit folder.")
@store_options
@json_option
@reports_errors
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
    force: bool,
    audit_dir: str,
    store: str | None,
    config: str | None,
    as_json: bool,
) -> None:
    """Replay snapshot extraction: every selected handler on every selected snapshot,
    reconciled (ADD / UPDATE / REINFORCE) and audited. Resumable."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.replay import replay as replay_flow
    from mempipe.progress import show_on_terminal

    context = load_context(store, config)
    context.open_store().close()
    with show_on_terminal():
        summary = replay_flow(
            org_id=org_id,
            project_id=project_id,
            user_id=user_id,
            session_id=session_id,
            snapshot_ids=list(snapshot_ids) or None,
            since=since,
            until=until,
            handlers=[h.strip() for h in handlers.split(",")] if handlers else None,
            extractor=extractor,
            concurrency=concurrency,
            force=force,
            store=context.store_url,
            config=str(context.settings.config),
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
        click.echo(f"audit: {summary.audit_dir} ({len(summary.audit_files)} Parquet file(s))")

    emit(summary, as_json, human)


@cli.command()
@click.option("--run-id", default=None, help="The audit of one run.")
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), default=None, help="From this day.")
@click.option("--until", type=click.DateTime(["%Y-%m-%d"]), default=None, help="To this day.")
@click.option("--out", default="audit", show_default=True, help="Where the Parquet goes.")
@store_options
@json_option
@reports_errors
def report(
    run_id: str | None,
    since: datetime | None,
    until: datetime | None,
    out: str,
    store: str | None,
    config: str | None,
    as_json: bool,
) -> None:
    """Write the audit (one row per ADD / UPDATE / REINFORCE) as Parquet partitioned by day,
    and summarise it by memory type and action, with failures by class."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.report import audit_report

    context = load_context(store, config)
    context.open_store().close()
    summary = audit_report(
        run_id=run_id,
        since=since.date() if since else None,
        until=until.date() if until else None,
        out=out,
        store=context.store_url,
        config=str(context.settings.config),
    )

    def human() -> None:
        click.echo(
            f"audit: {summary.rows} rows in {len(summary.files)} file(s) under {summary.out}"
        )
        for row in summary.actions:
            click.echo(f"  {row.memory_type:<11} {row.action:<9} {row.count}")
        click.echo(f"failures: {_counts(summary.failures)}")

    emit(summary, as_json, human)


@cli.command()
@click.argument("query")
@click.option(
    "--source",
    default="semantic",
    show_default=True,
    help="stm (the turns), semantic, episodic, procedural, taxonomic, or a declared custom type.",
)
@click.option(
    "--mode",
    type=click.Choice(["semantic", "text", "hybrid"]),
    default="hybrid",
    show_default=True,
)
@identity_options
@click.option("--session-id", default=None, help="Only this session.")
@click.option("--visibility", type=click.Choice(["private", "org"]), default=None)
@click.option(
    "--metadata",
    "metadata",
    multiple=True,
    metavar="metadata.KEY=VALUE",
    help="Filter on a declared partition key, by its qualified path (repeatable).",
)
@click.option("--top-k", default=10, show_default=True, type=click.IntRange(1, 1000))
@store_options
@json_option
@reports_errors
def search(
    query: str,
    source: str,
    mode: str,
    org_id: str | None,
    project_id: str | None,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    visibility: str | None,
    metadata: tuple[str, ...],
    top_k: int,
    store: str | None,
    config: str | None,
    as_json: bool,
) -> None:
    """Search turns or long-term memories; every identity option given is ANDed into the
    query, and one left out leaves that dimension open."""
    from mempipe.adapters.embedding import embedder_for
    from mempipe.bootstrap import load_context
    from mempipe.schemas.search import ReadFilter, SearchMode
    from mempipe.services.search import search as run_search

    filters = ReadFilter(
        org_id=org_id,
        project_id=project_id,
        user_id=user_id,
        agent_id=agent_id,
        session_id=session_id,
        visibility=visibility,
        metadata=_pairs(metadata, "--metadata"),
    )
    with closing(load_context(store, config).open_store()) as opened:
        result = run_search(opened, embedder_for, query, source, SearchMode(mode), filters, top_k)

    def human() -> None:
        for hit in result.hits:
            where = hit.message_id or hit.id
            click.echo(f"{hit.score:8.4f}  {where}  [{hit.user_id or '-'}]  {hit.text}")
        if not result.hits:
            click.echo("no hits")

    emit(result, as_json, human)


@cli.group(invoke_without_command=True)
@click.option("--model", default=None, help="Embedding model id (default: the configured one).")
@click.option("--dimensions", type=int, default=None, help="Check the model's dimension.")
@click.option(
    "--collections",
    default=None,
    metavar="LIST",
    help="Comma-separated: stm, semantic, episodic, procedural, taxonomic, custom (default all).",
)
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--gate",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Queries JSONL: refuse to switch if recall falls below --min-recall-ratio of the old.",
)
@click.option("--min-recall-ratio", default=0.95, show_default=True, type=float)
@click.option("--incremental", is_flag=True, help="Only embed what the serving model lacks.")
@store_options
@json_option
@click.pass_context
@reports_errors
def reembed(
    ctx: click.Context,
    model: str | None,
    dimensions: int | None,
    collections: str | None,
    batch_size: int,
    gate: str | None,
    min_recall_ratio: float,
    incremental: bool,
    store: str | None,
    config: str | None,
    as_json: bool,
) -> None:
    """Re-embed every record with another model, blue/green: new vectors beside the old,
    verified, switched atomically; `finalize` drops the old ones, `rollback` restores them.
    With --incremental, embed only what the serving model lacks (the nightly job)."""
    if ctx.invoked_subcommand is not None:
        return
    from mempipe.bootstrap import load_context
    from mempipe.flows.reembed import reembed as reembed_flow
    from mempipe.progress import show_on_terminal

    context = load_context(store, config)
    context.open_store().close()
    with show_on_terminal():
        summary = reembed_flow(
            model=model,
            dimensions=dimensions,
            collections=_list(collections),
            batch_size=batch_size,
            gate=gate,
            min_recall_ratio=min_recall_ratio,
            incremental=incremental,
            store=context.store_url,
            config=str(context.settings.config),
        )

    def human() -> None:
        for report in summary.collections:
            click.echo(
                f"{report.collection:<11} {report.vectors}/{report.records} records with a "
                f"{report.model_id} vector ({report.embedded_now} new, "
                f"{report.unembeddable} unembeddable)"
            )
        if summary.gate is not None:
            click.echo(
                f"recall gate: old {summary.gate.old_recall}, new {summary.gate.new_recall}, "
                f"ratio {summary.gate.ratio} (min {summary.gate.min_ratio})"
            )
        if not summary.incremental:
            click.echo(
                f"switched to {summary.model}; `mempipe reembed finalize` drops the old vectors"
                if summary.switched
                else f"not switched: {summary.reason}"
            )

    emit(summary, as_json, human)
    if not summary.incremental and not summary.switched:
        sys.exit(1)


def _list(value: str | None) -> list[str] | None:
    return [item.strip() for item in value.split(",") if item.strip()] if value else None


class Names(BaseModel):
    """What finalize and rollback touched."""

    collections: list[str]


@reembed.command("finalize")
@click.option("--collections", default=None, metavar="LIST", help="Default: all.")
@store_options
@json_option
@reports_errors
def reembed_finalize(
    collections: str | None, store: str | None, config: str | None, as_json: bool
) -> None:
    """Drop the vectors of the models a re-embed switched away from."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.reembed import reembed_finalize as finalize_flow

    context = load_context(store, config)
    dropped = finalize_flow(_list(collections), context.store_url, str(context.settings.config))
    emit(Names(collections=dropped), as_json, lambda: click.echo(f"dropped: {dropped or 'none'}"))


@reembed.command("rollback")
@click.option("--collections", default=None, metavar="LIST", help="Default: all.")
@store_options
@json_option
@reports_errors
def reembed_rollback(
    collections: str | None, store: str | None, config: str | None, as_json: bool
) -> None:
    """Serve the previous model's vectors again, dropping the newer ones."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.reembed import reembed_rollback as rollback_flow

    context = load_context(store, config)
    restored = rollback_flow(_list(collections), context.store_url, str(context.settings.config))
    emit(
        Names(collections=restored),
        as_json,
        lambda: click.echo(f"restored: {restored or 'nothing to roll back'}"),
    )


@cli.command()
@store_options
@json_option
@reports_errors
def models(store: str | None, config: str | None, as_json: bool) -> None:
    """The embedding models mempipe can use, and which one serves each collection."""
    from mempipe.bootstrap import load_context
    from mempipe.services.models import list_models

    with closing(load_context(store, config).open_store()) as opened:
        found = list_models(opened)
    if as_json:
        click.echo(json.dumps([m.model_dump(exclude={"collections"}) for m in found], indent=2))
        return
    for model in found:
        serving = f"serving {', '.join(model.collections)}" if model.active else "available"
        click.echo(f"{model.id:<20} {model.dimensions:>5}  {serving}")


@cli.command("eval")
@click.argument("queries", type=click.Path(exists=True, dir_okay=False))
@click.option("--source", default="semantic", show_default=True)
@click.option(
    "--mode", type=click.Choice(["semantic", "text", "hybrid"]), default="hybrid", show_default=True
)
@click.option("--k", default=10, show_default=True, type=click.IntRange(1, 1000))
@store_options
@json_option
@reports_errors
def evaluate_queries(
    queries: str,
    source: str,
    mode: str,
    k: int,
    store: str | None,
    config: str | None,
    as_json: bool,
) -> None:
    """Recall@k and MRR of labelled queries (JSONL: {"query", "relevant_ids", filters...})."""
    from pathlib import Path

    from mempipe.adapters.embedding import embedder_for
    from mempipe.bootstrap import load_context
    from mempipe.schemas.search import SearchMode
    from mempipe.services.evaluation import evaluate, read_queries

    labelled = read_queries(Path(queries))
    with closing(load_context(store, config).open_store()) as opened:
        result = evaluate(opened, embedder_for, labelled, source, SearchMode(mode), k)
    emit(
        result,
        as_json,
        lambda: click.echo(
            f"{result.queries} queries, {source} {mode}: recall@{k} {result.recall}, "
            f"MRR {result.mrr}"
        ),
    )


@cli.command("rebuild-indexes")
@click.option("--force", is_flag=True, help="Rebuild the indexes that drifted.")
@store_options
@json_option
@reports_errors
def rebuild_indexes_command(
    force: bool, store: str | None, config: str | None, as_json: bool
) -> None:
    """Compare each collection's declared vector and text index (dimension, metric, filter
    fields including the declared partition keys) with what exists; create what is absent;
    report drift; rebuild drifted indexes only with --force."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.indexes import rebuild_indexes

    context = load_context(store, config)
    context.open_store().close()
    report = rebuild_indexes(
        force=force, store=context.store_url, config=str(context.settings.config)
    )

    def human() -> None:
        for status in report.indexes:
            detail = f"  ({'; '.join(status.differences)})" if status.differences else ""
            click.echo(f"{status.state.value:<8} {status.kind:<6} {status.name}{detail}")
        if report.drift and not force:
            click.echo("drift found: `mempipe rebuild-indexes --force` rebuilds those indexes")

    emit(report, as_json, human)


@cli.command()
@store_options
@json_option
@reports_errors
def stats(store: str | None, config: str | None, as_json: bool) -> None:
    """Counts of turns, sessions, snapshots by state, memories by type, failures and runs."""
    from mempipe.bootstrap import load_context

    opened = load_context(store, config).open_store()
    try:
        result = opened.stats()
    finally:
        opened.close()

    def human() -> None:
        click.echo(f"store: {result.store}")
        click.echo(
            f"turns: {result.turns} ({result.unpromoted_turns} unpromoted) "
            f"in {result.sessions} sessions"
        )
        click.echo(f"snapshots: {result.snapshots.get('total', 0)} ({_counts(result.snapshots)})")
        click.echo(
            "memories (active/superseded): "
            + ", ".join(
                f"{kind} {counts.get('active', 0)}/{counts.get('superseded', 0)}"
                for kind, counts in result.memories.items()
            )
        )
        click.echo(f"failures: {_counts(result.failures)}")
        click.echo(f"runs: {_counts(result.runs) or 'none'}")

    emit(result, as_json, human)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in counts.items() if key != "total")


def main() -> None:
    cli()
