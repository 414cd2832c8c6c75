"""The CLI runner: the wiring every job's command shares, so that a command is its options and
one call. It loads the context (store URL, configuration, secret), runs the job's early check,
prints the job's plan with ``--plan``, prepares the store (refusing a missing one where the job
does not create it), runs the flow with bars on a terminal, and prints the summary, human or
``--json``; a run that did not do all its work prints what it did, then fails (exit 1). A store
that is not there is refused before any Prefect server is reached or started (a job that brings
data in may create its store: a server store is reached first, so that one down is said within
its timeout). It knows no job."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from pydantic import BaseModel

from mempipe.cli.options import emit, run_flow
from mempipe.schemas.costs import RunPlan

if TYPE_CHECKING:
    from mempipe.bootstrap import AppContext

S = TypeVar("S", bound=BaseModel)

COMMON = ("store", "config", "store_secret", "as_json", "plan")
"""The options the runner takes for itself; the rest are the job's request."""


def run_job(
    job: type[Any],
    options: dict[str, Any],
    show: Callable[[S, bool], None],
    ask: Callable[[Any, str], None] | None = None,
    show_preview: Callable[[Any], None] | None = None,
) -> None:
    """Run ``job`` (a :class:`~mempipe.flows.job.Job`) with the command's ``options``;
    ``show(summary, incomplete)`` prints the human summary; ``ask(request, store_url)``, where
    given, asks the user before anything is changed (and aborts the command on a no);
    ``show_preview(preview)`` prints what a job that previews (``--preview``) found."""
    from mempipe.bootstrap import command_context, reach_store
    from mempipe.cli.flow_runs import reporting_to_prefect
    from mempipe.interrupts import stop_on_signals
    from mempipe.progress import show_on_terminal

    common, context = _taken(options)
    as_json = bool(common["as_json"])
    reach_store(context.store_url, creates=job.creates_store)
    request = job.model_validate(options)
    request.check(context)
    if ask is not None:
        ask(request, context.store_url)
    if common["plan"]:
        plan = request.plan(context)  # a plan only reads: no run, no Prefect
        if isinstance(plan, RunPlan):
            emit_plan(plan, as_json)
        else:  # a job whose plan is what it would do, not what it would cost
            emit(plan, as_json, lambda: show(plan, False))
        return
    if show_preview is not None and request.preview:
        with stop_on_signals(), show_on_terminal(), command_context(context):  # writes nothing
            preview, incomplete = run_flow(request.previewed, context=context)
        emit(preview, as_json, lambda: show_preview(preview), incomplete)
        return
    with stop_on_signals(), reporting_to_prefect(), command_context(context):
        if request.prepares():
            context.prepare_store(create=job.creates_store)
        with show_on_terminal():
            summary, incomplete = run_flow(request.run, context=context)
        emit(summary, as_json, lambda: show(summary, incomplete is not None), incomplete)


def _taken(options: dict[str, Any]) -> tuple[dict[str, Any], AppContext]:
    """The runner's own options, taken out of ``options``, and the context they name."""
    from mempipe.bootstrap import load_context

    common = {name: options.pop(name, None) for name in COMMON}
    return common, load_context(common["store"], common["config"], common["store_secret"])


def run_query(
    query: Callable[..., S],
    options: dict[str, Any],
    show: Callable[[S], None],
    *,
    read_only: bool = True,
    existing: bool = False,
    prepare: bool = False,
    priced: bool = False,
) -> None:
    """Run a command that answers from the store, or tends it, without a flow:
    ``query(uow, **options)`` on the unit of work of the store the options name (``read_only``:
    opened only to read; ``existing``: the store must be there; ``prepare``: migrated and
    declared first); ``show(result)`` prints the human answer. A result's ``notes`` (a
    search's, say) go to stderr, with ``--json`` too. ``priced``: the query also takes the
    configuration's price table (``costs``)."""
    from mempipe.adapters.store.unit_of_work import unit_of_work

    common, context = _taken(options)
    if prepare:
        context.prepare_store()
    if priced:
        options["costs"] = context.config.costs
    with unit_of_work(context.store_url, read_only=read_only, existing=existing) as uow:
        result = query(uow, **options)
    for note in getattr(result, "notes", ()):
        click.echo(f"note: {note}", err=True)
    for warning in getattr(result, "warnings", ()):
        click.echo(f"warning: {warning}", err=True)
    emit(result, bool(common["as_json"]), lambda: show(result))


def _dollars(value: float | None) -> str:
    if value is None:
        return "unpriced"
    if 0 < value < 0.0001:
        return "under $0.0001"
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "no limit configured"
    hours, rest = divmod(round(seconds), 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min {rest % 60:02d} s"


def print_plan(plan: RunPlan) -> None:
    rows = [("purpose", "model", "items", "requests", "input tokens", "output tokens")]
    rows += [
        (
            line.purpose,
            line.model + ("" if line.provider else " (local)"),
            f"{line.items:,}",
            f"{line.requests:,}",
            f"{line.input_tokens:,}",
            f"{line.output_tokens:,}",
        )
        for line in plan.lines
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    click.echo(f"plan of {plan.job} on {plan.store} (via {plan.via}); nothing was written")
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        click.echo(
            "  ".join(cells + [cell.rjust(w) for cell, w in zip(row[2:], widths[2:], strict=True)])
        )
    click.echo(
        f"total: {plan.requests:,} requests, {plan.input_tokens:,} input tokens, "
        f"{plan.output_tokens:,} output tokens expected"
        + (f", {plan.batch_files} batch file(s)" if plan.via == "batch" else "")
    )
    cost = plan.cost
    click.echo(f"cost: {_dollars(cost.live_usd)} live, {_dollars(cost.batch_usd)} batch")
    if cost.unpriced_models:
        click.echo(f"  not in the price table (costs.prices): {', '.join(cost.unpriced_models)}")
    click.echo(
        f"duration live: {_duration(plan.duration.live_seconds)}; "
        f"batch: within {plan.duration.batch_window}"
    )
    for note in plan.not_predicted:
        click.echo(f"not predicted: {note}")


def emit_plan(plan: RunPlan, as_json: bool) -> None:
    if as_json:
        click.echo(plan.model_dump_json(indent=2))
    else:
        print_plan(plan)
