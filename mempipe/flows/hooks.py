"""Flow hooks shared by every job: a failed run is recorded in the store, never lost (a run
that recorded its own end, counts and error, keeps that record)."""

from __future__ import annotations

from typing import Any

from mempipe.bootstrap import load_context
from mempipe.errors import MempipeError
from mempipe.schemas.run import RunStatus


def record_failed_run(flow: Any, flow_run: Any, state: Any) -> None:
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
