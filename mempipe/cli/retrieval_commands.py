"""Reads: search, eval, models."""

from __future__ import annotations

import json
from contextlib import closing

import click

from mempipe.cli.options import (
    emit,
    identity_options,
    json_option,
    pairs,
    reports_errors,
    store_options,
)


@click.command()
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
        metadata=pairs(metadata, "--metadata"),
    )
    with closing(load_context(store, config).open_store(read_only=True)) as opened:
        result = run_search(opened, embedder_for, query, source, SearchMode(mode), filters, top_k)

    def human() -> None:
        for hit in result.hits:
            where = hit.message_id or hit.id
            click.echo(f"{hit.score:8.4f}  {where}  [{hit.user_id or '-'}]  {hit.text}")
        if not result.hits:
            click.echo("no hits")

    emit(result, as_json, human)


@click.command()
@store_options
@json_option
@reports_errors
def models(store: str | None, config: str | None, as_json: bool) -> None:
    """The embedding models mempipe can use, and which one serves each collection."""
    from mempipe.bootstrap import load_context
    from mempipe.services.models import list_models

    with closing(load_context(store, config).open_store(read_only=True)) as opened:
        found = list_models(opened)
    if as_json:
        click.echo(json.dumps([m.model_dump(exclude={"collections"}) for m in found], indent=2))
        return
    for model in found:
        serving = f"serving {', '.join(model.collections)}" if model.active else "available"
        click.echo(f"{model.id:<20} {model.dimensions:>5}  {serving}")


@click.command("eval")
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
    with closing(load_context(store, config).open_store(read_only=True)) as opened:
        result = evaluate(opened, embedder_for, labelled, source, SearchMode(mode), k)
    emit(
        result,
        as_json,
        lambda: click.echo(
            f"{result.queries} queries, {source} {mode}: recall@{k} {result.recall}, "
            f"MRR {result.mrr}"
        ),
    )
