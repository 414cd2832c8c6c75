"""Flow hooks shared by every job: a failed run is recorded in the store, never lost (a run
that recorded its own end, counts and error, keeps that record), and its one-line error is
logged to the run, so that it is where ops look first: `prefect deployment run ... --watch`
prints a run's logs, as the UI and `prefect flow-run logs` do."""

from __future__ import annotations

from typing import Any

from mempipe.bootstrap import load_context
from mempipe.errors import MempipeError
from mempipe.schemas.run import RunStatus

ENGINE_PREFIX = "Flow run encountered an exception: "


def one_line_error(message: str | None) -> str:
    """mempipe's one-line error from a failed state's message (Prefect prefixes it)."""
    return (message or "failed").removeprefix(ENGINE_PREFIX).splitlines()[0]


def record_failed_run(flow: Any, flow_run: Any, state: Any) -> None:
    from prefect.logging.loggers import flow_run_logger

    flow_run_logger(flow_run, flow).error("error: %s", one_line_error(state.message))
    parameters = flow_run.parameters or {}
    try:
        context = load_context(
            parameters.get("store"), parameters.get("config"), parameters.get("store_secret")
        )
        with context.unit_of_work() as uow:
            run = uow.runs.get_run(str(flow_run.id))
            if run is not None and run.status is RunStatus.RUNNING:
                message = state.message or "failed"
                uow.runs.finish_run(str(flow_run.id), RunStatus.FAILED, {}, message)
    except MempipeError:
        return  # the store itself was the problem (or not one yet); the run's error says so
