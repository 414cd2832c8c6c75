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
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.interrupts import stop_requested
from mempipe.progress import track
from mempipe.schemas.retention import (
    FORGET_BATCH,
    Expiry,
    ForgetCount,
    ForgetSummary,
    forget_counts,
)
from mempipe.schemas.run import FileKind
from mempipe.services.report.page import redact_page_rows
from mempipe.services.written_files import redact_parquet_text


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
            rows += redact_parquet_text(path, _forgotten_rows(gone))[1]
        elif written.kind is FileKind.REPORT and path.is_file():
            rows += redact_page_rows(
                path, lambda row: (row.memory_type, row.memory_id) in gone, dry_run=False
            )
    return rows


def _forgotten_rows(gone: set[tuple[str, str]]) -> Callable[[pa.Table], pa.ChunkedArray | None]:
    wanted = pa.array([f"{kind}\x1f{memory_id}" for kind, memory_id in gone])

    def chosen(table: pa.Table) -> pa.ChunkedArray | None:
        if not {"memory_type", "memory_id"} <= set(table.column_names):
            return None
        keys = pc.binary_join_element_wise(
            table.column("memory_type"), table.column("memory_id"), "\x1f"
        )
        return pc.is_in(keys, value_set=wanted)

    return chosen
