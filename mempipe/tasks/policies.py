"""Retry policies keyed on mempipe's transient marker, never on message text."""

from __future__ import annotations

from typing import Any


def retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry only errors marked retryable."""
    error = state.result(raise_on_failure=False)
    return bool(getattr(error, "retryable", False))
