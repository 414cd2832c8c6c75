"""``--plan`` and ``--via``: the options of the jobs that send work to a provider, and how a
plan is printed (a table on the terminal, one JSON document with ``--json``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from mempipe.schemas.costs import RunPlan

F = TypeVar("F", bound=Callable[..., Any])


def plan_option(command: F) -> F:
    return click.option(
        "--plan",
        is_flag=True,
        help="Write nothing; print the requests, tokens, cost (live and batch) and duration.",
    )(command)


def via_option(command: F) -> F:
    return click.option(
        "--via",
        type=click.Choice(["live", "batch"]),
        default="live",
        show_default=True,
        help="live: requests as the run goes; batch: the provider's Batch API (half price, "
        "within 24 h; OpenAI-compatible providers).",
    )(command)


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
