"""Progress of long work, shown as a Prefect progress artifact inside a run and as a bar on the
CLI's stderr. Tasks report through :func:`track`; the CLI installs its bar with
:func:`show_on_terminal`."""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol
from uuid import UUID

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

UPDATE_EVERY_SECONDS = 0.5
ARTIFACT_EVERY_SECONDS = 2.0
CLOSE_WAIT_SECONDS = 5.0
logger = logging.getLogger(__name__)


class ProgressSink(Protocol):
    def update(self, completed: float) -> None: ...

    def close(self) -> None: ...


SinkFactory = Callable[[str, float, str], ProgressSink]
_factories: list[SinkFactory] = []
_lock = threading.Lock()


class Tracker:
    """Fans progress out to every sink, at most every :data:`UPDATE_EVERY_SECONDS`."""

    def __init__(self, sinks: list[ProgressSink]) -> None:
        self._sinks = sinks
        self._last = 0.0
        self.completed = 0.0

    def update(self, completed: float, *, force: bool = False) -> None:
        self.completed = completed
        now = time.monotonic()
        if not force and now - self._last < UPDATE_EVERY_SECONDS:
            return
        self._last = now
        for sink in self._sinks:
            sink.update(completed)


@contextmanager
def track(label: str, total: float, unit: str) -> Iterator[Tracker]:
    sinks: list[ProgressSink] = []
    if _in_prefect_run() and not _on_a_dask_worker():
        sinks.append(InBackground(lambda: PrefectArtifactSink(f"{label} ({unit})", total)))
    with _lock:
        factories = list(_factories)
    sinks.extend(factory(label, total, unit) for factory in factories)
    tracker = Tracker(sinks)
    try:
        yield tracker
    finally:
        tracker.update(tracker.completed, force=True)  # where the work got, not the total
        for sink in sinks:
            sink.close()


def _in_prefect_run() -> bool:
    from prefect.context import FlowRunContext, TaskRunContext

    return TaskRunContext.get() is not None or FlowRunContext.get() is not None


def _on_a_dask_worker() -> bool:
    """Partitions on Dask workers publish no progress artifacts of their own: every worker's
    artifact traffic went to the one Prefect API beside the flow's task-run reporting, and
    under load the API held requests for minutes; the flow reports each partition's end."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except ValueError:
        return False
    return True


class InBackground:
    """Runs a sink on its own thread, keeping only the latest value, so that a slow or
    unanswering API (a Prefect server under load, seen holding a request for minutes) never
    stalls the work it reports on; at close the last value gets :data:`CLOSE_WAIT_SECONDS`."""

    def __init__(self, make: Callable[[], ProgressSink]) -> None:
        self._make = make
        self._latest: float | None = None
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._run,),
            name="mempipe-progress",
            daemon=True,
        )
        self._thread.start()

    def update(self, completed: float) -> None:
        with self._changed:
            self._latest = completed
            self._changed.notify()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join(CLOSE_WAIT_SECONDS)

    def _run(self) -> None:
        try:
            sink = self._make()
            due = 0.0
            while True:
                with self._changed:
                    while not self._closed and (self._latest is None or time.monotonic() < due):
                        self._changed.wait(None if self._latest is None else due - time.monotonic())
                    latest, self._latest, closed = self._latest, None, self._closed
                if latest is not None:
                    sink.update(latest)
                    due = time.monotonic() + ARTIFACT_EVERY_SECONDS
                if closed:
                    sink.close()
                    return
        except Exception as exc:  # progress is a side channel: the work goes on without it
            logger.warning("progress reporting stopped: %s", exc)


class PrefectArtifactSink:
    """A Prefect progress artifact, in percent."""

    def __init__(self, label: str, total: float) -> None:
        from prefect.artifacts import create_progress_artifact

        self._total = total
        self._id: UUID = create_progress_artifact(progress=0.0, description=label)  # type: ignore[assignment]

    def update(self, completed: float) -> None:
        """Nothing to do is all done (100 %), not a bar that never moves."""
        from prefect.artifacts import update_progress_artifact

        done = 100.0 if self._total <= 0 else min(100.0, 100.0 * completed / self._total)
        update_progress_artifact(self._id, progress=done)

    def close(self) -> None:
        return None


class TerminalBar:
    def __init__(self, progress: Progress, label: str, total: float, unit: str) -> None:
        self._progress = progress
        self._task = progress.add_task(label, total=total, unit=unit)

    def update(self, completed: float) -> None:
        self._progress.update(self._task, completed=completed)

    def close(self) -> None:
        return None


@contextmanager
def show_on_terminal(console: Console | None = None) -> Iterator[None]:
    """Draw a bar on stderr for everything tracked while this is open, when stderr is a
    terminal: a redirected stderr (a log file, a scheduler's capture) gets no bars."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} {task.fields[unit]}"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )

    def factory(label: str, total: float, unit: str) -> ProgressSink:
        return TerminalBar(progress, label, total, unit)

    with progress:
        with _lock:
            _factories.append(factory)
        try:
            yield
        finally:
            with _lock:
                _factories.remove(factory)
