"""A data request's erase: the user's records go from the store, and the user's text from the
audit in the store and in the Parquet audit files; the audit keeps its rows, so it still
counts what happened."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mempipe.adapters.store.base import Erasure
from mempipe.schemas.bundle import REDACTED, BundleSelection, EraseSummary


def erase_user(
    store: Erasure, selection: BundleSelection, *, dry_run: bool, audit_dir: Path | None
) -> EraseSummary:
    started = time.perf_counter()
    counts = store.erase_user(selection, dry_run=dry_run)
    files, rows = redact_audit_files(audit_dir, selection, dry_run=dry_run) if audit_dir else (0, 0)
    return EraseSummary(
        selection=selection,
        dry_run=dry_run,
        counts=counts,
        audit_files=files,
        audit_file_rows=rows,
        seconds=round(time.perf_counter() - started, 3),
    )


def redact_audit_files(
    audit_dir: Path, selection: BundleSelection, *, dry_run: bool
) -> tuple[int, int]:
    """Files and rows of the Parquet audit that hold the user's text; each such file rewritten
    beside itself and moved over it (a reader sees the old file or the new, never half)."""
    files = rows = 0
    for path in sorted(audit_dir.rglob("*.parquet")):
        table = pq.read_table(path, partitioning=None)
        mask = _owned(table, selection)
        owned = pc.sum(mask).as_py() or 0
        if not owned:
            continue
        files, rows = files + 1, rows + owned
        if dry_run:
            continue
        column = table.schema.get_field_index("text")
        redacted = pc.if_else(mask, pa.scalar(REDACTED), table.column("text"))
        aside = path.with_suffix(".parquet.erasing")
        pq.write_table(table.set_column(column, "text", redacted), aside)
        aside.replace(path)
    return files, rows


def _owned(table: pa.Table, selection: BundleSelection) -> pa.ChunkedArray:
    mask = pc.equal(table.column("user_id"), selection.user_id)
    for field in ("org_id", "project_id"):
        value = getattr(selection, field)
        if value is not None:
            mask = pc.and_(mask, pc.equal(table.column(field), value))
    return pc.fill_null(mask, False)
