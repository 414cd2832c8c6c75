"""How every step runs as a Prefect task: never cached, retried only on errors mempipe marks
transient (never on message text)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from prefect import Task, task
from prefect.cache_policies import NO_CACHE

P = ParamSpec("P")
R = TypeVar("R")


def retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry only errors marked retryable."""
    error = state.result(raise_on_failure=False)
    return bool(getattr(error, "retryable", False))


def step(name: str, *, retry_after: tuple[int, ...] = ()) -> Callable[[Callable[P, R]], Task[P, R]]:
    """A flow's named step. Not cached, because each run must read the store as it is now;
    retried once per wait in ``retry_after`` (seconds), and only after a transient error."""
    return task(
        name=name,
        cache_policy=NO_CACHE,
        retries=len(retry_after),
        retry_delay_seconds=list(retry_after) or 0,
        retry_condition_fn=retry_if_transient,
    )
