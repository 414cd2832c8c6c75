"""The store port: what flows and tasks need of a memory store, whatever the backend."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict

from mempipe.domain.promotion import TurnStamp
from mempipe.schemas.run import RunRecord, RunStatus
from mempipe.schemas.snapshot import Snapshot
from mempipe.schemas.summaries import StoreStats, TurnWriteResult
from mempipe.schemas.turn import Turn

if TYPE_CHECKING:
    from mempipe.migrations import Migration


class StoreCapabilities(BaseModel):
    """What a backend can do, declared so callers never inspect the adapter's class."""

    model_config = ConfigDict(frozen=True)

    transactions: bool
    vector_search: bool
    text_search: bool


class Store(Protocol):
    url: str
    capabilities: StoreCapabilities

    def applied_migrations(self) -> list[str]: ...

    def apply_migration(self, migration: Migration) -> None: ...

    def insert_turns(self, turns: Sequence[Turn], run_id: str | None) -> TurnWriteResult:
        """Insert a batch in one transaction; existing keys are skipped, never overwritten."""
        ...

    def count_unpromoted_turns(self) -> int: ...

    def iter_unpromoted_turns(self, page_size: int = 5000) -> Iterator[TurnStamp]:
        """Turns without a snapshot, ordered by (org, project, session, turn_seq), paged."""
        ...

    def save_snapshots(self, snapshots: Sequence[Snapshot]) -> set[str]:
        """Insert snapshots and mark their turns promoted, atomically; returns the ids of those
        that were new (an id already stored is left as it is)."""
        ...

    def start_run(self, run: RunRecord) -> None: ...

    def finish_run(
        self, run_id: str, status: RunStatus, counts: dict[str, int], error: str | None = None
    ) -> None: ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...
