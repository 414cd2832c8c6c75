"""What every request to a provider spent, counted where it goes through the provider's door
(:class:`mempipe.adapters.llm.guard.ProviderGuard`) and kept with the run in the store.

Each process counts its own requests, per run (the Prefect flow run it works for; ``process``
outside one), and writes them out where its part of the run ends: the run's end in the flow's
process (``record-run-end``), and each task that asks a provider as it ends, in whatever
process it ran (:func:`mempipe.bootstrap.spend_recorded`): a Dask worker's requests are
recorded as the flow process's are. The store adds each write to what it holds, so nothing is
counted twice and nothing is lost between tasks.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from mempipe.schemas.costs import ALL_TYPES, RequestKind, SpendRow, Via
from mempipe.schemas.provider import Usage

PROCESS = "process"
"""The run of work done outside any flow run (a preview, a search)."""

_counted: dict[tuple[str, str, str, str, str, str], SpendRow] = {}
_lock = threading.Lock()


def current_run() -> str:
    from prefect.runtime import flow_run

    run_id = flow_run.id
    return str(run_id) if run_id else PROCESS


def record(
    kind: RequestKind,
    model: str,
    usage: Usage | None,
    memory_type: str | None = None,
    *,
    via: Via = "live",
    requests: int = 1,
) -> None:
    """One answered request (or ``requests`` of a batch) and the usage its answer reported."""
    row = SpendRow(
        run_id=current_run(),
        day=datetime.now(UTC).date().isoformat(),
        kind=kind,
        model=model,
        memory_type=memory_type or ALL_TYPES,
        via=via,
    )
    with _lock:
        counted = _counted.setdefault(row.key, row)
        counted.requests += requests
        if usage is None:
            counted.unreported += requests
        else:
            counted.input_tokens += usage.prompt_tokens
            counted.output_tokens += usage.completion_tokens


def take(run_id: str) -> list[SpendRow]:
    """The run's counts in this process since they were last taken, removed."""
    with _lock:
        keys = [k for k in _counted if k[0] == run_id]
        return [_counted.pop(k) for k in keys]


def give_back(rows: list[SpendRow]) -> None:
    """Counts taken that could not be written: kept for the next write."""
    with _lock:
        for row in rows:
            counted = _counted.get(row.key)
            if counted is None:
                _counted[row.key] = row
            else:
                counted.add(row)
