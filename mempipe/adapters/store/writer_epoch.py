"""When the work now writing began, for the erase fence: a write of an owner erased after that
moment is work that may have read the owner's data before the erase, so it is dropped. A run
started after an erase is a new, explicit act and writes as usual."""

from __future__ import annotations

from datetime import UTC, datetime

PROCESS_STARTED = datetime.now(UTC)
"""This process's start (as near as mempipe knows it): the epoch of writes outside a flow."""


def writer_epoch() -> datetime:
    """The start of the Prefect flow run this thread works for, else the process's start (a
    worker thread of a run, or a process started for one run, began no later than that)."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    started = context.flow_run.start_time if context and context.flow_run else None
    return started if started is not None else PROCESS_STARTED


def fence_time(moment: datetime) -> str:
    """The fence's own sortable form of a time: UTC, to the microsecond."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
