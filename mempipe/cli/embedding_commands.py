"""Embeddings and indexes: reembed (finalize, rollback), rebuild-indexes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from mempipe.cli.options import (
    json_option,
    partitions_option,
    plan_option,
    reports_errors,
    scale_out_options,
    seed_option,
    store_command,
    store_options,
    via_option,
)
from mempipe.cli.runner import run_job

if TYPE_CHECKING:
    from mempipe.flows.reembed import Collections
    from mempipe.schemas.embedding import Bridge
    from mempipe.schemas.indexes import IndexReport
    from mempipe.schemas.reembed import ReembedPreview, ReembedSummary


@click.group(
    invoke_without_command=True, short_help="Move every record to another embedding model."
)
@click.option("--model", default=None, help="Embedding model id (default: the configured one).")
@click.option(
    "--dimensions",
    type=int,
    default=None,
    help="An openai: model's size to move to (a Matryoshka model's is cut from the stored "
    "vectors, with no request); for any other model, the size it must have.",
)
@click.option(
    "--collections",
    default=None,
    metavar="LIST",
    help="Comma-separated: stm, semantic, episodic, procedural, taxonomic, custom (default all).",
)
@click.option(
    "--batch-size",
    default=256,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Records embedded and written per batch.",
)
@click.option(
    "--gate",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Queries JSONL: refuse to switch if recall falls below --min-recall-ratio of the old.",
)
@click.option(
    "--gate-source",
    default=None,
    metavar="SOURCE",
    help="With --gate: the collection its queries' relevant ids are in (stm: the turns); "
    "default: the collection moved, where the re-embed moves one, else semantic.",
)
@click.option(
    "--min-recall-ratio",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0, 10),
    help="With --gate: the new model's recall over the old one's, at least.",
)
@click.option(
    "--incremental", is_flag=True, default=False, help="Only embed what the serving model lacks."
)
@click.option(
    "--preview",
    is_flag=True,
    default=False,
    help="Write nothing: embed a sample of each collection with the new model, and print the "
    "move's plan, the sample's spend, how much of each record's neighbourhood the new model "
    "keeps, and with --gate the recall each model would have and the gate's decision.",
)
@click.option(
    "--bridge",
    is_flag=True,
    default=False,
    help="Before the move, fit a map from the new model's queries into each collection's "
    "serving vectors on a sample (--sample, --seed): while the serving model cannot embed a "
    "query, search, eval and the gate answer through it, and say so; the switch retires it.",
)
@click.option(
    "--sample",
    type=click.IntRange(1),
    default=None,
    help="Records drawn per collection, with --seed: with --preview (default 1000, besides "
    "those --gate's queries name) or --bridge (default 2000).",
)
@seed_option
@click.option(
    "--html",
    is_flag=True,
    default=False,
    help="With --preview: also draw it as a page (figures only), beside a replay preview's.",
)
@partitions_option("Record-id ranges per collection, embedded at once.")
@via_option
@plan_option
@scale_out_options
@store_options
@json_option
@click.pass_context
@reports_errors
def reembed(ctx: click.Context, **options: Any) -> None:
    """Re-embed every record with another model, blue/green: new vectors beside the old,
    verified, switched atomically; `finalize` drops the old ones, `rollback` restores them.
    With --incremental, embed only what the serving model lacks (the nightly job)."""
    from mempipe.flows.reembed import Reembed

    if ctx.invoked_subcommand is None:
        run_job(Reembed, options, _show_reembed, show_preview=_show_preview)


def _show_preview(preview: ReembedPreview) -> None:
    click.echo(
        f"preview of a move to {preview.model} on {preview.store} (sample {preview.sample}, "
        f"seed {preview.seed}); nothing was written"
    )
    for c in preview.collections:
        agreement = (
            "no neighbours to compare"
            if c.neighbour_agreement is None
            else f"neighbour agreement {c.neighbour_agreement:.3f}"
        )
        click.echo(
            f"{c.collection:<11} {c.sampled} of {c.records} records sampled, served by "
            f"{c.serving_model or 'no model'}: {agreement}"
            + (f", {c.unembeddable} refused by the model" if c.unembeddable else "")
            + (f", {c.failed} failed" if c.failed else "")
        )
    gate = preview.gate
    if gate is not None:
        click.echo(
            f"recall gate, predicted ({gate.queries} queries on {gate.source}): old "
            f"{gate.old_recall:.3f} (measured), new {gate.new_recall:.3f} (from the sample), "
            f"ratio {gate.ratio:.3f} (min {gate.min_ratio}): "
            + ("would switch" if gate.passes else "would not switch")
        )
        click.echo(
            f"the old model's recall from the sample, as the new one's is estimated: "
            f"{gate.old_recall_from_sample:.3f}"
        )
    sample, whole = preview.sample_plan, preview.plan
    spent = sum(s.requests for s in preview.spent), sum(s.input_tokens for s in preview.spent)
    if not any(line.provider for line in sample.lines) and not preview.spent:
        click.echo("the sample: embedded in this process by local models, nothing sent")
    else:
        click.echo(
            f"the sample: planned {sample.requests} requests, {sample.input_tokens} tokens; "
            f"spent {spent[0]} requests, {spent[1]} tokens"
        )
    click.echo(
        f"the whole move: {whole.requests} requests, {whole.input_tokens} tokens, "
        + ("unpriced" if whole.cost.live_usd is None else f"${whole.cost.live_usd:.4f} live")
    )
    if preview.html:
        click.echo(f"page: {preview.html}")


def _show_reembed(summary: ReembedSummary, incomplete: bool) -> None:
    for report in summary.collections:
        click.echo(
            f"{report.collection:<11} {report.vectors}/{report.records} records with a vector "
            f"of {report.model_id} ({report.embedded_now} new, "
            f"{report.unembeddable} unembeddable, {report.failed} failed)"
            + (
                f"; {report.batches} provider batch(es), {report.batches_adopted} adopted"
                if report.batches
                else ""
            )
        )
    if summary.bridges:
        _show_bridges(summary.bridges)
    if summary.gate is not None:
        click.echo(
            f"recall gate: old {summary.gate.old_recall}, new {summary.gate.new_recall}, "
            f"ratio {summary.gate.ratio} (min {summary.gate.min_ratio})"
        )
        if summary.gate.bridge is not None:
            click.echo(
                f"warning: the old recall of {summary.gate.old_bridged} of "
                f"{summary.gate.queries} queries measured {summary.gate.bridge.warning}",
                err=True,
            )
    if not summary.incremental:
        click.echo(
            f"switched to {summary.model}; `mempipe reembed finalize` drops the old vectors"
            if summary.switched
            else f"not switched: {summary.reason}"
        )
    if incomplete:
        click.echo("next: the same command again resumes where this run stopped")


@reembed.command("finalize", short_help="Drop the vectors of the model switched away from.")
@click.option("--collections", default=None, metavar="LIST", help="Default: all.")
@store_command
def reembed_finalize(**options: Any) -> None:
    """Drop the vectors of the models a re-embed switched away from."""
    from mempipe.flows.reembed import Finalize

    run_job(Finalize, options, lambda done, _: click.echo(f"dropped: {_names(done) or 'none'}"))


@reembed.command("rollback", short_help="Serve the previous model's vectors again.")
@click.option("--collections", default=None, metavar="LIST", help="Default: all.")
@store_command
def reembed_rollback(**options: Any) -> None:
    """Serve the previous model's vectors again, dropping the newer ones."""
    from mempipe.flows.reembed import Rollback

    run_job(
        Rollback,
        options,
        lambda done, _: click.echo(f"restored: {_names(done) or 'nothing to roll back'}"),
    )


@reembed.command("bridge", short_help="Fit a bridge from a model into the serving vectors.")
@click.option("--model", required=True, help="The model whose queries the bridge maps.")
@click.option("--collections", default=None, metavar="LIST", help="Default: all.")
@click.option(
    "--sample", type=click.IntRange(1), default=None, help="Records drawn per collection (2000)."
)
@seed_option
@plan_option
@store_command
def reembed_bridge(**options: Any) -> None:
    """Fit, on a sample of each collection, a map from MODEL's queries into the vectors that
    serve it, and keep it; move nothing. While the serving model cannot embed a query (its
    provider down, the model retired, its key refused), search, eval and the gate answer
    through the bridge and say so. `reembed --model MODEL --bridge` with the same sample reuses
    it; the switch retires it."""
    from mempipe.flows.reembed import FitBridge

    run_job(FitBridge, options, lambda done, _: _show_bridges(done.bridges))


def _show_bridges(bridges: list[Bridge]) -> None:
    if not bridges:
        click.echo("no bridge: no other model serves these collections")
    for bridge in bridges:
        click.echo(
            f"bridge {bridge.collection:<11} {bridge.query_model} into {bridge.serving_model}'s "
            f"vectors, fitted on {bridge.pairs} records (held-out cosine "
            f"{bridge.held_out_cosine:.3f}): answers while {bridge.serving_model} cannot"
        )
        if bridge.poor:
            click.echo(f"warning: {bridge.poor}", err=True)


def _names(done: Collections) -> str:
    return ", ".join(done.collections)


@click.command("rebuild-indexes", short_help="Compare indexes with their declarations; build.")
@click.option("--force", is_flag=True, default=False, help="Rebuild the indexes that drifted.")
@store_command
def rebuild_indexes_command(**options: Any) -> None:
    """Compare each collection's declared vector and text index (dimension, metric, filter
    fields including the declared partition keys) with what exists; create what is absent;
    report drift; rebuild drifted indexes only with --force."""
    from mempipe.flows.indexes import RebuildIndexes

    force = options["force"]
    run_job(RebuildIndexes, options, lambda report, _: _show_indexes(report, force))


def _show_indexes(report: IndexReport, force: bool) -> None:
    for status in report.indexes:
        detail = f"  ({'; '.join(status.differences)})" if status.differences else ""
        click.echo(f"{status.state.value:<8} {status.kind:<6} {status.name}{detail}")
    if report.drift and not force:
        click.echo("drift found: `mempipe rebuild-indexes --force` rebuilds those indexes")
