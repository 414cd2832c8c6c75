"""Where mempipe wrote users' text outside the store: recorded when written, so that an erase
reaches every copy (DESIGN rule: no user text where an erase cannot reach it)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.bundle import REDACTED
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


def redact_parquet_text(
    folder: Path,
    chosen: Callable[[pa.Table], pa.ChunkedArray | None],
    *,
    dry_run: bool = False,
    own: Callable[[Path], bool] | None = None,
) -> tuple[int, int]:
    """Files and rows of a Parquet folder whose ``text`` is redacted: the rows ``chosen`` marks
    (None: the file has none it could mark) not redacted yet, of the files ``own`` accepts.
    Each such file is rewritten beside itself, its metadata kept, and moved over it (a reader
    sees the old file or the new). An erase's (a user's rows) and a forget's (its memories')."""
    files = rows = 0
    for path in sorted(folder.rglob("*.parquet")):
        if own is not None and not own(path):
            continue
        table = pq.read_table(path, partitioning=None)
        marked = chosen(table) if "text" in table.column_names else None
        if marked is None:
            continue
        unredacted = pc.not_equal(table.column("text"), REDACTED)
        mask = pc.fill_null(pc.and_(marked, unredacted), False)
        found = pc.sum(mask).as_py() or 0
        if not found:
            continue
        files, rows = files + 1, rows + found
        if dry_run:
            continue
        column = table.schema.get_field_index("text")
        redacted = pc.if_else(mask, pa.scalar(REDACTED), table.column("text"))
        aside = path.with_suffix(".parquet.redacting")
        pq.write_table(table.set_column(column, "text", redacted), aside)
        aside.replace(path)
    return files, rows
