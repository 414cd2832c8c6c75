"""Every job's flow says why it failed where ops look, whatever failed and wherever: its first
check, the store's opening, a task, the run's own verdict (work left undone). The one-line
``error:`` line is, in this order, written to the run's record in the store where the run had
begun one, emitted as an event of the run (``mempipe.run.failed``, its resource named by the
line: `prefect deployment run ... --watch` prints it, since it reads events until the final
state, whether or not the server streams logs), logged as the run's last line of its own
(Prefect's ``Finished in state Failed('error: …')`` after it; the traceback with it only for an
error mempipe did not raise on purpose, a bug's or a library's), and made the failed state's
message (`prefect flow-run inspect`). The command that called the flow in its process
still gets the error itself (its summary, its exit code). A crash (the process lost, a signal
Prefect turns into one) is said and recorded by the ``on_crashed`` hook the same way."""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from prefect import Flow, flow
from prefect.states import Failed, State

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.bootstrap import load_context, record_spend
from mempipe.errors import MempipeError, error_line
from mempipe.schemas.run import RunStatus

FAILED_EVENT = "mempipe.run.failed"
ENGINE_PREFIX = "Flow run encountered an exception: "

P = ParamSpec("P")
R = TypeVar("R")


def job_flow(name: str, description: str | None = None) -> Callable[[Callable[P, R]], Flow[P, R]]:
    """``@job_flow("backfill")``: the job's Prefect flow, its every failure said (the module's
    notes); ``description`` where one body serves two flows (else its docstring)."""

    def decorate(body: Callable[P, R]) -> Flow[P, R]:
        signature = _resolved(body)

        @functools.wraps(body)
        def said(*args: P.args, **kwargs: P.kwargs) -> Any:
            try:
                return body(*args, **kwargs)
            except Exception as error:
                parameters = signature.bind_partial(*args, **kwargs).arguments
                return _failed(error_line(error), error, parameters)

        said.__signature__ = signature  # type: ignore[attr-defined]
        return flow(name=name, description=description, on_crashed=[record_crashed_run])(said)

    return decorate


def _resolved(body: Callable[..., Any]) -> inspect.Signature:
    """The body's signature with its annotations resolved in its own module: Prefect builds the
    parameters' model (and the deployment's schema) from the flow function's signature, and
    would resolve names as text in this module's namespace."""
    hints = typing.get_type_hints(body, include_extras=True)
    signature = inspect.signature(body)
    return signature.replace(
        parameters=[
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in signature.parameters.values()
        ],
        return_annotation=hints.get("return", signature.return_annotation),
    )


def _failed(line: str, error: BaseException, parameters: dict[str, Any]) -> State:
    from prefect import get_run_logger
    from prefect.runtime import flow_run

    said = f"error: {line.splitlines()[0] if line else 'failed'}"
    if flow_run.id:
        _close_if_running(parameters, str(flow_run.id), line)
        _emit(str(flow_run.id), said)
        foreign = None if isinstance(error, MempipeError) else error
        get_run_logger().error(said, exc_info=foreign)
        error.mempipe_said = True  # type: ignore[attr-defined]
    return Failed(message=said, data=error)


class SaidOnce(logging.Filter):
    """A failure the run has said is not logged again after its line: a worker's engine raises
    the failed run's error when the flow returns, and would log its traceback last."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not getattr(error, "mempipe_said", False)


logging.getLogger("prefect.flow_runs").addFilter(SaidOnce())


def record_crashed_run(flow: Any, flow_run: Any, state: Any) -> None:
    """A crash is said as a failure is, once the state is final (nothing ran the body's end)."""
    from prefect.logging.loggers import flow_run_logger

    line = (state.message or "crashed").removeprefix(ENGINE_PREFIX)
    said = f"error: {line.splitlines()[0]}"
    _close_if_running(flow_run.parameters or {}, str(flow_run.id), line)
    _emit(str(flow_run.id), said)
    flow_run_logger(flow_run, flow).error(said)


def _emit(run_id: str, said: str) -> None:
    """The event, sent before the run's state is: `--watch` reads events until that state."""
    from prefect.events import emit_event
    from prefect.events.worker import EventsWorker

    emit_event(
        event=FAILED_EVENT,
        resource={"prefect.resource.id": f"mempipe.run.{run_id}", "prefect.resource.name": said},
        related=[
            {
                "prefect.resource.id": f"prefect.flow-run.{run_id}",
                "prefect.resource.role": "flow-run",
            }
        ],
    )
    EventsWorker.drain_all(timeout=10, at_exit=False)


def _close_if_running(parameters: dict[str, Any], run_id: str, message: str) -> None:
    """The store's record of a run that had begun one ends failed with the line (a run that
    recorded its own end, counts and error, keeps that record)."""
    try:
        context = load_context(
            parameters.get("store"), parameters.get("config"), parameters.get("store_secret")
        )
        _fail_running(context.store_url, run_id, message)
    except MempipeError:
        return  # the store itself was the problem (or not one yet); the line says so


def _fail_running(store_url: str, run_id: str, message: str) -> None:
    """The run's failed end, with what its process spent on providers for it."""
    with unit_of_work(store_url, existing=True) as uow:
        run = uow.runs.get_run(run_id)
        if run is not None and run.status is RunStatus.RUNNING:
            uow.runs.finish_run(run_id, RunStatus.FAILED, {}, message)
        record_spend(uow)
