"""How the flows a command calls in its own process are run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def direct_runs() -> Iterator[None]:
    """Prefect's flow-run heartbeat is off for the runs a command starts, unless the user set
    ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` (environment or profile). Prefect emits it so that an
    automation can mark a deployment's run Crashed when its worker dies; a command's run is not
    a deployment's, mempipe's own run records already say whether it is alive (``mempipe
    runs``), and at the end of every run Prefect's engine waits for the heartbeat thread's next
    one-second tick: measured on the 20-turn sample, 1.08 s a run with it, 0.43 s without."""
    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        get_current_settings,
        temporary_settings,
    )

    if "heartbeat_frequency" in get_current_settings().flows.model_fields_set:
        yield
        return
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def starts_flows(command: F) -> F:
    """For a command that calls a flow: its runs are :func:`direct_runs`."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with direct_runs():
            return command(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
