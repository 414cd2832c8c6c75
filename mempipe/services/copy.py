"""Copy every record of one store into another (SQLite <-> MongoDB, SQLite -> SQLite), batch by
batch, resuming where a killed copy into the same target left off, and verified at the end by
comparing each collection's count and digest on both sides."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.interrupts import stop_requested
from mempipe.progress import track
from mempipe.rejects import append_rejects
from mempipe.schemas.bundle import BUNDLE_MODELS, BundleSelection, CopySummary, bundle_collection
from mempipe.services.bundle_import import (
    HeldRows,
    check_custom_types,
    write_records,
)
from mempipe.services.bundle_vectors import (
    reusable,
    serving,
    set_vectors,
    vector_pages,
)
from mempipe.services.export import digest_collection, records

EVERYTHING = BundleSelection()


def copy_store(
    source: UnitOfWork,
    target: UnitOfWork,
    *,
    run_id: str,
    rejects_file: Path,
    with_vectors: bool = False,
    batch_size: int = 2000,
) -> CopySummary:
    """Each batch is committed with the copy's checkpoint for its collection (where the batch
    has a transaction), so a run killed anywhere and started again goes on after the last
    committed batch and writes nothing twice."""
    started = time.perf_counter()
    check_custom_types(target, source.schema.custom_types)
    copied: Counter[str] = Counter()
    rejected = 0
    held = HeldRows(target)
    with track("copy", len(BUNDLE_MODELS), "collections") as progress:
        for done, collection in enumerate(BUNDLE_MODELS, start=1):
            name = f"copy:{source.url}:{collection}"
            after = target.runs.resume_point("copy", name, run_id)
            target.runs.set_checkpoint(run_id, name, after)
            while not stop_requested():
                page, cursor = source.transfer.export_page(
                    collection, EVERYTHING, after, batch_size
                )
                if page:
                    added, rejects = write_records(
                        target,
                        collection,
                        page,
                        run_id,
                        held,
                        then=lambda cursor=cursor, name=name: target.runs.set_checkpoint(
                            run_id, name, cursor
                        ),
                    )
                    copied[collection] += added
                    rejected += append_rejects(rejects_file, rejects)
                after = cursor
                if len(page) < batch_size:
                    break
            progress.update(done)
    if stop_requested():  # the rest is copied by the next run, which also verifies
        differences, digests, vectors = ["stopped before the end"], {}, {}
    else:
        vectors = _copy_vectors(source, target, batch_size) if with_vectors else {}
        differences, digests = verify(source, target, batch_size)
    return CopySummary(
        run_id=run_id,
        source=source.url,
        target=target.url,
        copied=dict(copied),
        rejected=rejected,
        rejects_path=str(rejects_file) if rejected else None,
        verified=not differences,
        differences=differences,
        digests=digests,
        vectors=vectors,
        seconds=round(time.perf_counter() - started, 3),
    )


def _copy_vectors(source: UnitOfWork, target: UnitOfWork, batch_size: int) -> dict[str, int]:
    """The source's serving vectors set where the target can serve them; vectors the target
    holds already are kept (``set_vectors`` adds only what is missing)."""
    copied: dict[str, int] = {}
    for entry in serving(source):
        name = bundle_collection(entry.collection)
        if not reusable(target, name, entry):
            continue
        copied[name] = sum(
            set_vectors(target, name, entry.model_id, page)
            for page in vector_pages(source, entry, EVERYTHING, batch_size)
        )
    return copied


def verify(
    source: UnitOfWork, target: UnitOfWork, batch_size: int
) -> tuple[list[str], dict[str, str]]:
    """Collections whose count or digest differ between the stores (runs: the source's runs
    only; the target also holds the copy's own), and the source's digests."""
    differences, digests = [], {}
    source_runs = _run_ids(source, batch_size)
    for collection in BUNDLE_MODELS:
        mine = digest_collection(source, collection, EVERYTHING, batch_size)
        theirs = digest_collection(target, collection, EVERYTHING, batch_size, runs=source_runs)
        digests[collection] = mine.hexdigest()
        if (mine.count, mine.hexdigest()) != (theirs.count, theirs.hexdigest()):
            differences.append(
                f"{collection}: {mine.count} records ({mine.hexdigest()[:12]}) in the source, "
                f"{theirs.count} ({theirs.hexdigest()[:12]}) in the target"
            )
    return differences, digests


def _run_ids(uow: UnitOfWork, batch_size: int) -> set[str]:
    return {run.run_id for run in records(uow, "runs", EVERYTHING, batch_size)}
