"""The unit of work: one job's hold on a store.

It owns the connection (closed when the job's step ends), the transaction boundaries and the
erase fence, and hands services the store as small repositories, one per
aggregate (:mod:`mempipe.adapters.store.base`). A service receives a unit of work and never
opens a store: tasks open one from the store's public URL (a connection does not travel to
another process, a URL does), tests build one over any store, the in-memory fake included.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from types import TracebackType

from mempipe.adapters.store.base import (
    AuditLog,
    Erasure,
    FileLog,
    IndexAdmin,
    Leases,
    Memories,
    ProviderBatches,
    Registry,
    Retention,
    RunLog,
    Schema,
    Search,
    Store,
    Transfer,
    Turns,
    Vectors,
    WorkQueue,
)
from mempipe.adapters.store.factory import open_store
from mempipe.errors import StoreDamagedError


class UnitOfWork:
    """The store's repositories, each typed as the port it is, over one connection."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.turns: Turns = store
        self.work: WorkQueue = store
        self.memories: Memories = store
        self.audit: AuditLog = store
        self.vectors: Vectors = store
        self.models: Registry = store
        self.search: Search = store
        self.indexes: IndexAdmin = store
        self.runs: RunLog = store
        self.leases: Leases = store
        self.schema: Schema = store
        self.transfer: Transfer = store
        self.erasure: Erasure = store
        self.retention: Retention = store
        self.files: FileLog = store
        self.batches: ProviderBatches = store

    @property
    def url(self) -> str:
        """The store's public URL (no password): what may be recorded and printed."""
        return self._store.url

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction holding the write lock from its start: reconciliation, an
        import's batch, anything that must land whole or not at all."""
        return self._store.write_transaction()

    def rehearsal(self) -> AbstractContextManager[None]:
        """Everything done inside, undone at its end: what a preview writes to see what a run
        would do."""
        return self._store.rehearsal()

    def erased_since(
        self, org_id: str, project_id: str, user_id: str | None, epoch: datetime
    ) -> bool:
        """The erase fence: whether this owner was erased after ``epoch``, when the work that
        is about to write began."""
        return self._store.erased_since(org_id, project_id, user_id, epoch)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
        if isinstance(error, UnicodeDecodeError):
            raise StoreDamagedError(self.url, f"a text that is not UTF-8: {error}") from error


def unit_of_work(store_url: str, *, read_only: bool = False, existing: bool = False) -> UnitOfWork:
    """A unit of work over the store at ``store_url`` (opened as :func:`open_store` does: nothing is
    migrated; ``existing``: a store that is there already; ``read_only`` for jobs that only
    read)."""
    return UnitOfWork(open_store(store_url, read_only=read_only, existing=existing))
