"""Vectors in a bundle or a copy: the serving model's vectors of turns and memories, by record
reference, reused by the target when it serves the same model (or serves nothing yet for that
collection, and then serves the bundle's); otherwise the records wait for ``reembed
--incremental``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.bundle import BundleSelection, bundle_collection, store_collection
from mempipe.schemas.embedding import ModelRegistration, ModelState, RegistryEntry


def serving(uow: UnitOfWork) -> list[RegistryEntry]:
    return [e for e in uow.models.registry() if e.state is ModelState.SERVING]


def vector_pages(
    uow: UnitOfWork, entry: RegistryEntry, selection: BundleSelection, batch_size: int
) -> Iterator[list[tuple[str, list[float]]]]:
    after = None
    while True:
        page, after = uow.transfer.export_vectors(
            bundle_collection(entry.collection), entry.model_id, selection, after, batch_size
        )
        if page:
            yield page
        if after is None:
            return


def write_vectors(
    uow: UnitOfWork, out: Path, selection: BundleSelection, batch_size: int
) -> dict[str, tuple[str, int]]:
    """One Parquet file per collection served by a model: ``id``, ``vector`` (fixed-size list);
    returns collection -> (model, vectors written)."""
    written: dict[str, tuple[str, int]] = {}
    for entry in serving(uow):
        schema = pa.schema(
            [("id", pa.string()), ("vector", pa.list_(pa.float32(), entry.dimensions))]
        )
        count = 0
        name = bundle_collection(entry.collection)
        with pq.ParquetWriter(out / f"vectors-{name}.parquet", schema) as writer:
            for page in vector_pages(uow, entry, selection, batch_size):
                writer.write_table(
                    pa.table(
                        {"id": [r for r, _ in page], "vector": [v for _, v in page]},
                        schema=schema,
                    )
                )
                count += len(page)
        written[name] = (entry.model_id, count)
    return written


def reusable(target: UnitOfWork, collection: str, source: RegistryEntry) -> bool:
    """The target serves the source's model for the collection, or serves nothing there yet
    (then it serves the source's model from now on, asked as the source recorded)."""
    model_id = source.model_id
    served = target.models.serving_model(store_collection(collection))
    if served is None:
        target.vectors.register_model(
            ModelRegistration(
                collection=store_collection(collection),
                model_id=model_id,
                dimensions=source.dimensions,
                state=ModelState.SERVING,
                options=source.options,
            )
        )
        return True
    return served == model_id


def set_vectors(
    target: UnitOfWork, collection: str, model_id: str, page: list[tuple[str, list[float]]]
) -> int:
    rowids = target.transfer.record_rowids(collection, [ref for ref, _ in page])
    return target.vectors.set_vectors(
        store_collection(collection), model_id, [(rowids[r], v) for r, v in page if r in rowids]
    )


def read_vectors(path: Path, batch_size: int) -> Iterator[list[tuple[str, list[float]]]]:
    for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
        rows = batch.to_pydict()
        yield list(zip(rows["id"], rows["vector"], strict=True))
