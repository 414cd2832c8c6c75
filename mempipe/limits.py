"""Prefect global concurrency limits: jobs that must not overlap on one store hold its only
slot, and calls to LLM and embedding providers can draw on a server-wide rate limit.

The limits live on the Prefect server, so they hold across workers, machines and
deployments, not only inside one process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from prefect import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from mempipe.errors import TransientError


class JobBusyError(TransientError):
    """Another run of the same job holds the store; trying later can succeed."""


def limit_name(job: str, store_url: str) -> str:
    """One limit per (job, store): re-embeds of two stores may run side by side."""
    return f"mempipe-{job}-{hashlib.sha256(store_url.encode()).hexdigest()[:12]}"


def ensure_limit(name: str, limit: int = 1) -> None:
    """Create the limit on the Prefect server unless it exists (concurrently: one wins)."""
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
            return
        except ObjectNotFound:
            pass
        with suppress(ObjectAlreadyExists):
            client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name=name, limit=limit)
            )


@contextmanager
def exclusive(job: str, store_url: str, wait_s: float) -> Iterator[str]:
    """Hold the only slot of ``job`` on this store; a second run waits up to ``wait_s`` and
    then fails naming the limit (it is never queued silently behind a long migration)."""
    name = limit_name(job, store_url)
    ensure_limit(name)
    acquired = False
    try:
        with concurrency(name, occupy=1, timeout_seconds=wait_s, strict=True):
            acquired = True
            yield name
    except TimeoutError as exc:
        if acquired:
            raise
        raise JobBusyError(
            f"another {job} of {store_url} is running (Prefect concurrency limit {name!r}); "
            f"waited {wait_s:g} s"
        ) from exc
