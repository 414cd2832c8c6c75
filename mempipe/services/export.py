"""Export a store, or one org, project or user of it, as a bundle: one Parquet file per
collection, written batch by batch, and a manifest with counts and content digests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import pyarrow.parquet as pq
from pydantic import BaseModel

from mempipe import __version__
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.digest import Digest
from mempipe.progress import track
from mempipe.schemas.arrow import arrow_schema, to_arrow_table
from mempipe.schemas.bundle import (
    BUNDLE_MODELS,
    NOT_DIGESTED,
    BundleSelection,
    ExportSummary,
    Manifest,
)
from mempipe.services.bundle_vectors import write_vectors

MANIFEST = "manifest.json"


def store_kind(url: str) -> str:
    return "mongodb" if url.startswith("mongodb") else "sqlite"


def pages(
    uow: UnitOfWork, collection: str, selection: BundleSelection, batch_size: int
) -> Iterator[list[BaseModel]]:
    """A collection's records for a selection, page by page (memory stays flat)."""
    after = None
    while True:
        page, after = uow.transfer.export_page(collection, selection, after, batch_size)
        if page:
            yield page
        if len(page) < batch_size:
            return


def records(
    uow: UnitOfWork, collection: str, selection: BundleSelection, batch_size: int = 5000
) -> Iterator[BaseModel]:
    return chain.from_iterable(pages(uow, collection, selection, batch_size))


def digest_collection(
    uow: UnitOfWork,
    collection: str,
    selection: BundleSelection,
    batch_size: int,
    runs: set[str] | None = None,
) -> Digest:
    """The digest of what a store holds of a collection for a selection (of the runs, only
    those in ``runs`` when given: an import compares the bundle's runs, not its own)."""
    digest = Digest()
    for record in records(uow, collection, selection, batch_size):
        if collection == "runs" and runs is not None and record.run_id not in runs:
            continue
        digest.add(record, NOT_DIGESTED.get(collection, ()))
    return digest


def export_bundle(
    uow: UnitOfWork,
    out: Path,
    selection: BundleSelection,
    *,
    with_vectors: bool = False,
    batch_size: int = 5000,
) -> ExportSummary:
    """``with_vectors``: the serving model's vectors too, one file per collection."""
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    digests: dict[str, Digest] = {}
    with track("export", len(BUNDLE_MODELS), "collections") as progress:
        for done, (collection, model) in enumerate(BUNDLE_MODELS.items(), start=1):
            digests[collection] = _write_collection(
                uow, out / f"{collection}.parquet", collection, model, selection, batch_size
            )
            progress.update(done)
    vectors = write_vectors(uow, out, selection, batch_size) if with_vectors else {}
    manifest = Manifest(
        mempipe_version=__version__,
        source_store=store_kind(uow.url),
        selection=selection,
        counts={c: d.count for c, d in digests.items()},
        digests={c: d.hexdigest() for c, d in digests.items()},
        registry=uow.models.registry(),
        partition_keys=list(uow.schema.partition_keys),
        custom_types=list(uow.schema.custom_types),
        vectors={c: model for c, (model, _) in vectors.items()},
    )
    (out / MANIFEST).write_text(manifest.model_dump_json(indent=2))
    return ExportSummary(
        out=str(out.resolve()),
        counts=manifest.counts,
        digests=manifest.digests,
        vectors={c: n for c, (_, n) in vectors.items()},
        seconds=round(time.perf_counter() - started, 3),
    )


def _write_collection(
    uow: UnitOfWork,
    path: Path,
    collection: str,
    model: type,
    selection: BundleSelection,
    batch_size: int,
) -> Digest:
    digest = Digest()
    with pq.ParquetWriter(path, arrow_schema(model)) as writer:
        for page in pages(uow, collection, selection, batch_size):
            for record in page:
                digest.add(record, NOT_DIGESTED.get(collection, ()))
            writer.write_table(to_arrow_table(page, model))
    return digest
