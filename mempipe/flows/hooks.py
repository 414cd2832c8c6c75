"""Flow hooks shared by every job: a failed run is recorded in the store, never lost (a run
that recorded its own end, counts and error, keeps that record), and its one-line error is
said where ops look first: logged to the run (the UI, `prefect flow-run logs`) and, by the
flows' own bookkeeping before the run fails (:func:`say_failed`), emitted as an event of the run
(``mempipe.run.failed``, its resource named by the error), which `prefect deployment run ...
--watch` prints whether or not the server streams logs."""

from __future__ import annotations

from typing import Any

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bootstrap import given_store, load_context
from mempipe.errors import MempipeError
from mempipe.schemas.run import RunStatus

ENGINE_PREFIX = "Flow run encountered an exception: "
FAILED_EVENT = "mempipe.run.failed"


def say_failed(error: BaseException) -> None:
    """Emit the run's one-line error as an event of its flow run, before the run fails: `--watch`
    stops reading events at the run's final state, and prints logs only where the server
    streams them, so this is the line it shows."""
    from prefect.events import emit_event
    from prefect.runtime import flow_run

    if not flow_run.id:
        return
    line = str(error) if isinstance(error, MempipeError) else f"{type(error).__name__}: {error}"
    emit_event(
        event=FAILED_EVENT,
        resource={
            "prefect.resource.id": f"mempipe.run.{flow_run.id}",
            "prefect.resource.name": f"error: {line.splitlines()[0] if line else 'failed'}",
        },
        related=[
            {
                "prefect.resource.id": f"prefect.flow-run.{flow_run.id}",
                "prefect.resource.role": "flow-run",
            }
        ],
    )


def one_line_error(message: str | None) -> str:
    """mempipe's one-line error from a failed state's message (Prefect prefixes it)."""
    return (message or "failed").removeprefix(ENGINE_PREFIX).splitlines()[0]


def record_failed_run(flow: Any, flow_run: Any, state: Any) -> None:
    from prefect.events import emit_event
    from prefect.logging.loggers import flow_run_logger

    said = f"error: {one_line_error(state.message)}"
    flow_run_logger(flow_run, flow).error(said)
    emit_event(
        event="mempipe.run.failed",
        resource={
            "prefect.resource.id": f"mempipe.run.{flow_run.id}",
            "prefect.resource.name": said,
        },
        related=[
            {
                "prefect.resource.id": f"prefect.flow-run.{flow_run.id}",
                "prefect.resource.role": "flow-run",
            }
        ],
    )
    parameters = flow_run.parameters or {}
    try:
        context = load_context(
            parameters.get("store"), parameters.get("config"), parameters.get("store_secret")
        )
        _close_if_running(context.store_url, str(flow_run.id), state.message or "failed")
    except MempipeError:
        return  # the store itself was the problem (or not one yet); the run's error says so


@given_store()
def _close_if_running(uow: UnitOfWork, run_id: str, message: str) -> None:
    run = uow.runs.get_run(run_id)
    if run is not None and run.status is RunStatus.RUNNING:
        uow.runs.finish_run(run_id, RunStatus.FAILED, {}, message)
