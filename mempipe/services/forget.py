"""Forgetting by policy (``mempipe forget``): what the project's retention policy expires goes
from the store, collection by collection, in batches of one transaction each, so a killed run
leaves whole batches and a rerun queues again what is left. The plan counts the very query the
run forgets by (at the same ``as_of``, record for record), and the reads leave out the same.

What forgetting removes from mempipe's own files: each forgotten memory's text in the audit
folders and report pages the store recorded (the store's audit rows were redacted with the
records)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.interrupts import stop_requested
from mempipe.progress import track
from mempipe.schemas.bundle import REDACTED
from mempipe.schemas.retention import (
    FORGET_BATCH,
    Expiry,
    ForgetCount,
    ForgetSummary,
    forget_counts,
)
from mempipe.schemas.run import FileKind
from mempipe.services.report.page import redact_page_rows


def plan_forget(uow: UnitOfWork, expiry: Expiry) -> ForgetSummary:
    """What a run as of ``expiry.as_of`` would forget, writing nothing."""
    started = time.perf_counter()
    counts = uow.retention.expired_counts(expiry)
    return ForgetSummary(
        as_of=expiry.as_of,
        plan=True,
        policy=expiry.policy,
        counts=counts,
        forgotten=sum(c.records for c in counts),
        seconds=round(time.perf_counter() - started, 3),
    )


def forget_collection(
    uow: UnitOfWork, expiry: Expiry, collection: str, run_id: str, batch: int = FORGET_BATCH
) -> list[ForgetCount]:
    """Forget what ``expiry`` expires in ``collection``, per owner and rule; stops between
    batches when asked to (the run is then interrupted, and a rerun goes on)."""
    queued = uow.retention.queue_expired(expiry, collection)
    done: Counter[tuple[str, str, str | None, str]] = Counter()
    with track(f"forget {collection}", queued, "records") as progress:
        while not stop_requested():
            forgotten = uow.retention.forget_queued(collection, batch, run_id, datetime.now(UTC))
            if not forgotten:
                break
            done.update({(c.org_id, c.project_id, c.user_id, c.rule): c.records for c in forgotten})
            progress.update(done.total())
    return forget_counts(collection, [(*key, n) for key, n in sorted(done.items(), key=str)])


def redact_forgotten_files(uow: UnitOfWork) -> int:
    """The audit folders and report pages the store recorded, with the text of every memory
    ever forgotten redacted in place where it is not yet (each file rewritten beside itself and
    moved over it, a page drawn again), so a run killed before this step is made good by the
    next; how many rows."""
    gone = uow.retention.forgotten_memories()
    if not gone:
        return 0
    rows = 0
    for written in uow.files.written_files():
        path = Path(written.path)
        if written.kind is FileKind.AUDIT and path.is_dir():
            rows += _redact_folder(path, gone)
        elif written.kind is FileKind.REPORT and path.is_file():
            rows += redact_page_rows(
                path, lambda row: (row.memory_type, row.memory_id) in gone, dry_run=False
            )
    return rows


def _redact_folder(folder: Path, gone: set[tuple[str, str]]) -> int:
    rows = 0
    for path in sorted(folder.rglob("*.parquet")):
        table = pq.read_table(path, partitioning=None)
        if not {"text", "memory_type", "memory_id"} <= set(table.column_names):
            continue
        mask = _forgotten_rows(table, gone)
        hits = pc.sum(mask).as_py() or 0
        if not hits:
            continue
        rows += hits
        column = table.schema.get_field_index("text")
        redacted = pc.if_else(mask, pa.scalar(REDACTED), table.column("text"))
        aside = path.with_suffix(".parquet.forgetting")
        pq.write_table(table.set_column(column, "text", redacted), aside)
        aside.replace(path)
    return rows


def _forgotten_rows(table: pa.Table, gone: set[tuple[str, str]]) -> pa.ChunkedArray:
    keys = pc.binary_join_element_wise(
        table.column("memory_type"), table.column("memory_id"), "\x1f"
    )
    wanted: Sequence[str] = [f"{t}\x1f{i}" for t, i in gone]
    held = pc.and_(
        pc.is_in(keys, value_set=pa.array(wanted)), pc.not_equal(table.column("text"), REDACTED)
    )
    return pc.fill_null(held, False)
