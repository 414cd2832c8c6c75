"""Embeddings and indexes: reembed (finalize, rollback), rebuild-indexes."""

from __future__ import annotations

from collections.abc import Callable

import click
from pydantic import BaseModel

from mempipe.cli.flow_runs import starts_flows
from mempipe.cli.options import (
    emit,
    json_option,
    reports_errors,
    run_flow,
    scale_out_options,
    split_list,
    store_options,
)
from mempipe.cli.plans import plan_option, via_option


@click.group(invoke_without_command=True)
@click.option("--model", default=None, help="Embedding model id (default: the configured one).")
@click.option("--dimensions", type=int, default=None, help="Check the model's dimension.")
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
    "--min-recall-ratio",
    default=0.95,
    show_default=True,
    type=float,
    help="With --gate: the new model's recall over the old one's, at least.",
)
@click.option("--incremental", is_flag=True, help="Only embed what the serving model lacks.")
@click.option(
    "--partitions",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Record-id ranges per collection, embedded at once.",
)
@via_option
@plan_option
@scale_out_options
@store_options
@json_option
@click.pass_context
@reports_errors
@starts_flows
def reembed(
    ctx: click.Context,
    model: str | None,
    dimensions: int | None,
    collections: str | None,
    batch_size: int,
    gate: str | None,
    min_recall_ratio: float,
    incremental: bool,
    partitions: int,
    via: str,
    plan: bool,
    task_runner: str,
    dask_address: str | None,
    store: str | None,
    config: str | None,
    store_secret: str | None,
    as_json: bool,
) -> None:
    """Re-embed every record with another model, blue/green: new vectors beside the old,
    verified, switched atomically; `finalize` drops the old ones, `rollback` restores them.
    With --incremental, embed only what the serving model lacks (the nightly job)."""
    if ctx.invoked_subcommand is not None:
        return
    from mempipe.adapters.embedding import embedder_for
    from mempipe.bootstrap import load_context
    from mempipe.flows.reembed import reembed_flow
    from mempipe.progress import show_on_terminal

    context = load_context(store, config, store_secret)
    if model is not None:
        embedder_for(model)
    if plan:
        from mempipe.cli.plans import emit_plan
        from mempipe.flows.reembed import chosen_collections
        from mempipe.services.plans import reembed_plan
        from mempipe.settings import load_batch_limits, load_llm_settings

        with context.unit_of_work(read_only=True, existing=True) as uow:
            found = reembed_plan(
                uow,
                chosen_collections(split_list(collections)),
                model or context.config.memory.embedding.model,
                incremental=incremental,
                batch_size=batch_size,
                via=via,  # type: ignore[arg-type]
                costs=context.config.costs,
                llm=load_llm_settings(),
                limits=load_batch_limits(),
            )
        emit_plan(found, as_json)
        return
    context.prepare_store()
    with show_on_terminal():
        summary, incomplete = run_flow(
            reembed_flow,
            model=model,
            dimensions=dimensions,
            collections=split_list(collections),
            batch_size=batch_size,
            gate=gate,
            min_recall_ratio=min_recall_ratio,
            incremental=incremental,
            partitions=partitions,
            via=via,
            task_runner=task_runner,
            dask_address=dask_address,
            **context.flow_options(),
        )

    def human() -> None:
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
        if incomplete is not None:
            click.echo("next: the same command again resumes where this run stopped")

    emit(summary, as_json, human, incomplete)


class Names(BaseModel):
    """What finalize and rollback touched."""

    collections: list[str]


@reembed.command("finalize")
@click.option("--collections", default=None, metavar="LIST", help="Default: all.")
@store_options
@json_option
@reports_errors
@starts_flows
def reembed_finalize(
    collections: str | None,
    store: str | None,
    config: str | None,
    store_secret: str | None,
    as_json: bool,
) -> None:
    """Drop the vectors of the models a re-embed switched away from."""
    from mempipe.flows.reembed import reembed_finalize_flow as finalize_flow

    dropped = _end_move(finalize_flow, collections, store, config, store_secret)
    emit(
        Names(collections=dropped),
        as_json,
        lambda: click.echo(f"dropped: {', '.join(dropped) or 'none'}"),
    )


@reembed.command("rollback")
@click.option("--collections", default=None, metavar="LIST", help="Default: all.")
@store_options
@json_option
@reports_errors
@starts_flows
def reembed_rollback(
    collections: str | None,
    store: str | None,
    config: str | None,
    store_secret: str | None,
    as_json: bool,
) -> None:
    """Serve the previous model's vectors again, dropping the newer ones."""
    from mempipe.flows.reembed import reembed_rollback_flow as rollback_flow

    restored = _end_move(rollback_flow, collections, store, config, store_secret)
    emit(
        Names(collections=restored),
        as_json,
        lambda: click.echo(f"restored: {', '.join(restored) or 'nothing to roll back'}"),
    )


def _end_move(
    end_flow: Callable[..., list[str]],
    collections: str | None,
    store: str | None,
    config: str | None,
    store_secret: str | None,
) -> list[str]:
    """Run the finalize or rollback flow on the store and collections the options name."""
    from mempipe.bootstrap import load_context

    context = load_context(store, config, store_secret)
    return end_flow(
        collections=split_list(collections),
        **context.flow_options(),
    )


@click.command("rebuild-indexes")
@click.option("--force", is_flag=True, help="Rebuild the indexes that drifted.")
@store_options
@json_option
@reports_errors
@starts_flows
def rebuild_indexes_command(
    force: bool, store: str | None, config: str | None, store_secret: str | None, as_json: bool
) -> None:
    """Compare each collection's declared vector and text index (dimension, metric, filter
    fields including the declared partition keys) with what exists; create what is absent;
    report drift; rebuild drifted indexes only with --force."""
    from mempipe.bootstrap import load_context
    from mempipe.flows.indexes import rebuild_indexes_flow

    context = load_context(store, config, store_secret)
    context.prepare_store()
    report = rebuild_indexes_flow(
        force=force,
        **context.flow_options(),
    )

    def human() -> None:
        for status in report.indexes:
            detail = f"  ({'; '.join(status.differences)})" if status.differences else ""
            click.echo(f"{status.state.value:<8} {status.kind:<6} {status.name}{detail}")
        if report.drift and not force:
            click.echo("drift found: `mempipe rebuild-indexes --force` rebuilds those indexes")

    emit(report, as_json, human)
