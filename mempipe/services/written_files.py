"""Where mempipe wrote users' text outside the store: recorded when written, so that an erase
reaches every copy (DESIGN rule: no user text where an erase cannot reach it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.run import FileKind, WrittenFile


def record_written(
    uow: UnitOfWork, path: str | Path, kind: FileKind, run_id: str | None, user_id: str | None
) -> None:
    """Recorded before the run writes there (a run killed mid-way has still said where it
    wrote); a path that never came to be holds nothing to erase."""
    uow.files.record_file(
        WrittenFile(
            path=str(Path(path).absolute()),
            kind=kind,
            run_id=run_id,
            user_id=user_id,
            written_at=datetime.now(UTC),
        )
    )
