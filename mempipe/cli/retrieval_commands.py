"""Reads: search, eval, models."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mempipe.cli.options import (
    identity_filters,
    pairs,
    store_command,
)
from mempipe.cli.runner import run_query
from mempipe.schemas.evaluation import EvalResult, Scores

if TYPE_CHECKING:
    from mempipe.schemas.search import SearchResult

F = TypeVar("F", bound=Callable[..., Any])


def searched(command: F) -> F:
    """What is searched and how: a search's and an evaluation's options, the same."""
    command = click.option(
        "--mode",
        type=click.Choice(["semantic", "text", "hybrid"]),
        default="hybrid",
        show_default=True,
        help="semantic: by meaning (vectors); text: by words (BM25); hybrid: both, fused.",
    )(command)
    return click.option(
        "--source",
        default="semantic",
        show_default=True,
        help="stm (the turns), semantic, episodic, procedural, taxonomic, or a declared custom "
        "type.",
    )(command)


@click.command(short_help="Search turns or long-term memories.")
@click.argument("query")
@searched
@identity_filters
@click.option("--session-id", default=None, help="Only this session.")
@click.option(
    "--visibility",
    type=click.Choice(["private", "org"]),
    default=None,
    help="Only memories private to their user, or only those shared with the org.",
)
@click.option(
    "--metadata",
    "metadata",
    multiple=True,
    default=None,
    callback=lambda _, param, value: pairs(value, "--metadata"),
    metavar="metadata.KEY=VALUE",
    help="Filter on a declared partition key, by its qualified path (repeatable).",
)
@click.option(
    "--top-k", default=10, show_default=True, type=click.IntRange(1, 1000), help="Hits to print."
)
@store_command
def search(**options: Any) -> None:
    """Search turns or long-term memories; every identity option given is ANDed into the
    query, and one left out leaves that dimension open."""
    from mempipe.services.search import find

    run_query(find, options, _show_hits)


def _show_hits(result: SearchResult) -> None:
    if result.hits:
        click.echo(f"{'score':>8}  id  [user]  text")
    for hit in result.hits:
        where = hit.message_id or hit.id
        said = f"{hit.name}: {hit.text}" if hit.name else hit.text
        click.echo(f"{hit.score:8.4f}  {where}  [{hit.user_id or '-'}]  {said}")
    if not result.hits:
        click.echo("no hits")


@click.command(short_help="The embedding models, and which serves what.")
@store_command
def models(store: str | None, config: str | None, store_secret: str | None, as_json: bool) -> None:
    """The embedding models mempipe can use, and which one serves each collection."""
    from mempipe.adapters.store.unit_of_work import unit_of_work
    from mempipe.bootstrap import load_context
    from mempipe.services.models import list_models

    with unit_of_work(load_context(store, config, store_secret).store_url, read_only=True) as uow:
        found = list_models(uow)
    if as_json:
        listed = [m.model_dump(mode="json", exclude={"collections"}) for m in found]
        click.echo(json.dumps(listed, indent=2))
        return
    width = max((len(model.id) for model in found), default=0)
    for model in found:
        serving = f"serving {', '.join(model.collections)}" if model.active else "available"
        click.echo(f"{model.id:<{width}} {model.dimensions:>5}  {serving}")
        for bridge in model.bridges:
            click.echo(
                f"{'':<{width}}        bridge {bridge.collection}: {bridge.query_model}'s "
                f"queries into these vectors ({bridge.pairs} pairs, held-out cosine "
                f"{bridge.held_out_cosine:.3f})"
            )


@click.command("eval", short_help="Recall@k and MRR of labelled queries.")
@click.argument("queries", type=click.Path(exists=True, dir_okay=False))
@searched
@click.option(
    "--k",
    "ks",
    multiple=True,
    default=(10,),
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Recall@k for each k given (repeatable: --k 5 --k 10); the first is the headline.",
)
@click.option(
    "--model",
    "model_id",
    default=None,
    help="Search this model's vectors instead of the serving model's (what a re-embed's recall "
    "gate measures for the new model).",
)
@click.option(
    "--group-by",
    default=None,
    help="Also report per value of this query field (default: category or question_type when "
    "the file has one).",
)
@click.option(
    "--details",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write one JSON line per query: the rank of each relevant id, and its recall@k.",
)
@click.option(
    "--strict", is_flag=True, default=False, help="Refuse query fields eval does not use."
)
@store_command
def evaluate_queries(**options: Any) -> None:
    """Recall@k and MRR of labelled queries (JSONL: {"query", "relevant_ids", filters...});
    fields it does not use are ignored and counted."""
    from mempipe.services.evaluation import evaluate_file

    details = options["details"]
    run_query(evaluate_file, options, lambda result: click.echo(eval_summary(result, details)))


def eval_summary(result: EvalResult, details: str | None) -> str:
    def scores(s: Scores) -> str:
        recalls = ", ".join(f"recall@{k} {r:.3f}" for k, r in s.recall_at.items())
        return f"{recalls}, MRR {s.mrr:.3f}"

    lines = [f"{result.queries} queries, {result.source} {result.mode}: {scores(result)}"]
    lines += [f"  {result.group_by}={g.group} ({g.queries}): {scores(g)}" for g in result.groups]
    if result.ignored_fields:
        ignored = ", ".join(f"{f} ({n})" for f, n in sorted(result.ignored_fields.items()))
        lines.append(f"ignored fields (lines): {ignored}")
    if details is not None:
        lines.append(f"details: {Path(details).resolve()}")
    return "\n".join(lines)
