"""Run bookkeeping, written once: a writing flow prepares the store, records its run from
start to end (kept alive by a heartbeat, holding the store's lock of the job where it has one),
and ends as its outcome says: done, incomplete (exit 1) or interrupted (exit 143 / 130)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from prefect.runtime import flow_run
from pydantic import BaseModel

from mempipe.bootstrap import AppContext
from mempipe.errors import IncompleteRunError
from mempipe.heartbeat import keep_alive
from mempipe.interrupts import raise_if_stopped
from mempipe.locks import store_lock
from mempipe.schemas.run import FileKind
from mempipe.tasks.runs import (
    prepare_store,
    record_run_end,
    record_run_start,
    record_written_file,
)

S = TypeVar("S", bound=BaseModel)


class RecordedRun:
    """The flow run as the store records it."""

    def __init__(self, store_url: str) -> None:
        self.run_id = str(flow_run.id)
        self.store_url = store_url

    def record_file(self, path: str | Path, kind: FileKind, user_id: str | None = None) -> None:
        """A file this run writes users' text into, recorded before it is written: an erase
        must reach it."""
        record_written_file(self.store_url, str(path), kind, self.run_id, user_id)

    def end(self, counts: dict[str, int], failed: str | None = None) -> None:
        """Record the outcome: interrupted when a signal stopped the run, failed when
        ``failed`` says what is left undone, else completed."""
        record_run_end(self.store_url, self.run_id, counts, failed)


@contextmanager
def recorded_run(
    context: AppContext,
    flow: str,
    parameters: dict[str, Any],
    *,
    alive: bool = False,
    lock: str | None = None,
    lock_wait_s: float = 60,
    creates_store: bool = False,
) -> Iterator[RecordedRun]:
    """Prepare the context's store (unless the command already did) and record the run's start
    in it; ``alive``: a heartbeat keeps the run's leases while the block runs; ``lock``: the
    block holds the store's lock of that name, waiting up to ``lock_wait_s`` for another live
    run to let it go;
    ``creates_store``: a job that brings data in may create the store, any other refuses one
    that is not there."""
    store_url = context.store_url
    run = RecordedRun(store_url)
    if not context.prepared:
        prepare_store(store_url, context.declarations, create=creates_store)
    record_run_start(store_url, run.run_id, flow, parameters)
    with ExitStack() as held:
        if alive or lock:
            held.enter_context(keep_alive(store_url, run.run_id))
        if lock:
            held.enter_context(store_lock(store_url, lock, run.run_id, lock_wait_s))
        yield run


def concluded(summary: S, job: str, failed: str | None) -> S:
    """The summary of a run that did all its work; one stopped by a signal raises
    :class:`InterruptedRunError`, one with work left undone :class:`IncompleteRunError`
    (each carries the summary, which the CLI prints)."""
    raise_if_stopped(summary, job)
    if failed:
        raise IncompleteRunError(failed, summary)
    return summary
