"""Progress of long work, shown as a Prefect progress artifact inside a run and as a bar on the
CLI's stderr. Tasks report through :func:`track`; the CLI installs its bar with
:func:`show_on_terminal`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol
from uuid import UUID

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

UPDATE_EVERY_SECONDS = 0.5


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

    def update(self, completed: float, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < UPDATE_EVERY_SECONDS:
            return
        self._last = now
        for sink in self._sinks:
            sink.update(completed)


@contextmanager
def track(label: str, total: float, unit: str) -> Iterator[Tracker]:
    sinks: list[ProgressSink] = []
    if _in_prefect_run():
        sinks.append(PrefectArtifactSink(f"{label} ({unit})", total))
    with _lock:
        factories = list(_factories)
    sinks.extend(factory(label, total, unit) for factory in factories)
    tracker = Tracker(sinks)
    try:
        yield tracker
        tracker.update(total, force=True)
    finally:
        for sink in sinks:
            sink.close()


def _in_prefect_run() -> bool:
    from prefect.context import FlowRunContext, TaskRunContext

    return TaskRunContext.get() is not None or FlowRunContext.get() is not None


class PrefectArtifactSink:
    """A Prefect progress artifact, in percent."""

    def __init__(self, label: str, total: float) -> None:
        from prefect.artifacts import create_progress_artifact

        self._total = max(total, 1.0)
        self._id: UUID = create_progress_artifact(progress=0.0, description=label)  # type: ignore[assignment]

    def update(self, completed: float) -> None:
        from prefect.artifacts import update_progress_artifact

        update_progress_artifact(self._id, progress=min(100.0, 100.0 * completed / self._total))

    def close(self) -> None:
        return None


class TerminalBar:
    def __init__(self, progress: Progress, label: str, total: float, unit: str) -> None:
        self._progress = progress
        self._task = progress.add_task(label, total=total, unit=unit)

    def update(self, completed: float) -> None:
        self._progress.update(self._task, completed=completed)

    def close(self) -> None:
        self._progress.update(self._task, completed=self._progress.tasks[self._task].total)


@contextmanager
def show_on_terminal(console: Console | None = None) -> Iterator[None]:
    """Draw a bar on stderr for everything tracked while this is open."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} {task.fields[unit]}"),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
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
