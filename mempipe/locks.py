"""Jobs that must not overlap on one store (a re-embed, its finalize and rollback) hold the
store's lease of that job. The store is the source of truth: the lock holds across processes,
machines, Prefect servers and homes, and it belongs to a live run; a dead holder is closed
(:func:`recover_dead_runs`) and the lock taken at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.domain.liveness import LEASE
from mempipe.errors import JobBusyError
from mempipe.services.runs import describe_holder, recover_dead_runs

POLL_S = 1.0


@contextmanager
def store_lock(store_url: str, job: str, run_id: str, wait_s: float) -> Iterator[str]:
    """Hold ``job`` on this store for ``run_id`` (a run recorded as running, kept alive by its
    heartbeat); a second run waits up to ``wait_s`` for a live holder, then fails naming it."""
    with unit_of_work(store_url) as uow:
        deadline = time.monotonic() + wait_s
        while (holder := uow.leases.acquire_lease(job, run_id, LEASE)) is not None:
            if recover_dead_runs(uow):
                continue
            if time.monotonic() >= deadline:
                raise JobBusyError(
                    f"another {job} of {uow.url} is running: {describe_holder(uow, holder)}; "
                    f"waited {wait_s:g} s. Run this again once it ends (`mempipe runs` shows it; "
                    "a run whose process or machine is gone is freed within a minute)"
                )
            time.sleep(POLL_S)
        try:
            yield job
        finally:
            uow.leases.release_leases(run_id, [job])
