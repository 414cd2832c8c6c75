"""Re-embedding through a provider's Batch API (``reembed --via batch``): the records still
without a vector of the model, as embeddings requests in batch files; each batch's answers
validated as live answers are and written with the same ``set_vectors`` (a record that has its
vector keeps it), so the switch rules see exactly what a live run leaves.

A run first adopts the batches a killed run left open, waits for them and applies them; only
then does it submit what is still missing: no request goes to the provider twice. A failed
line, or a request an expired or cancelled batch never ran, leaves its records without a
vector, recorded as the provider's failure: a live rerun or a new batch embeds them.
"""

from __future__ import annotations

from collections.abc import Iterator

from mempipe.adapters.embedding.openai_compat import BATCH, OpenAIEmbedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import status_failure
from mempipe.errors import MempipeError
from mempipe.interrupts import StopRequested, stop_requested
from mempipe.schemas.batch import BatchRequest, ProviderBatch
from mempipe.schemas.provider import BatchInfo
from mempipe.schemas.reembed import CollectionReport
from mempipe.services.provider_batches import BatchWork
from mempipe.services.reembed.fill import record_embedding_failures, registered

WRITE_EVERY = 2048
"""Vectors written per store transaction while a batch's output is read."""


def scope_of(collection: str, model_id: str) -> str:
    return f"reembed:{collection}:{model_id}"


def embed_collection_via_batch(
    uow: UnitOfWork,
    work: BatchWork,
    collection: str,
    embedder: OpenAIEmbedder,
    *,
    state: str,
) -> CollectionReport:
    report = registered(uow, collection, embedder, state)
    adopted = work.adopt()
    report.batches_adopted = len(adopted)
    _apply_all(uow, work, collection, embedder, adopted, report)
    if not stop_requested():
        submitted = work.submit(embedding_requests(uow, collection, embedder))
        _apply_all(uow, work, collection, embedder, submitted, report)
    report.records, report.vectors = uow.vectors.vector_counts(collection, embedder.model_id)
    return report


def embedding_requests(
    uow: UnitOfWork, collection: str, embedder: OpenAIEmbedder
) -> Iterator[BatchRequest]:
    """The records without a vector, in id order, as requests of the live embedder's size."""
    after = 0
    while batch := uow.vectors.records_missing_vectors(collection, embedder.model_id, after, BATCH):
        ids = [record_id for record_id, _ in batch]
        yield BatchRequest(
            custom_id=f"{collection}-{ids[0]}-{ids[-1]}",
            body=embedder.request_body([text or "" for _, text in batch]),
            items=list(ids),
            inputs=len(ids),
        )
        after = ids[-1]


def _apply_all(
    uow: UnitOfWork,
    work: BatchWork,
    collection: str,
    embedder: OpenAIEmbedder,
    batches: list[ProviderBatch],
    report: CollectionReport,
) -> None:
    try:
        for batch, info in work.follow(batches):
            errors = apply_batch(uow, work, collection, embedder, batch, info, report)
            work.close(batch, info, str(errors[0]) if errors else None)
            report.batches += 1
    except StopRequested:
        return  # asked to stop while waiting: the open batches are the next run's to adopt


def apply_batch(
    uow: UnitOfWork,
    work: BatchWork,
    collection: str,
    embedder: OpenAIEmbedder,
    batch: ProviderBatch,
    info: BatchInfo,
    report: CollectionReport,
) -> list[MempipeError]:
    """Write the vectors of every answered line; count and record the records of every failed
    or unanswered one. Returns the failures."""
    model = embedder.model_id
    pairs: list[tuple[int, list[float]]] = []
    answered: set[str] = set()
    errors: list[MempipeError] = []
    failed = 0
    for line in work.lines(info):
        ids = batch.items.get(line.custom_id)
        if ids is None or line.custom_id in answered:
            continue
        answered.add(line.custom_id)
        error = work.line_failure(line)
        if error is None:
            try:
                found = embedder.vectors_from(line.response.body, len(ids))  # type: ignore[union-attr]
            except MempipeError as invalid:
                error = invalid
            else:
                pairs.extend((int(i), v) for i, v in zip(ids, found, strict=True))
        if error is not None:
            errors.append(error)
            failed += len(ids)
        if len(pairs) >= WRITE_EVERY:
            report.embedded_now += uow.vectors.set_vectors(collection, model, pairs)
            pairs = []
    report.embedded_now += uow.vectors.set_vectors(collection, model, pairs)
    left = [c for c in batch.items if c not in answered]
    if left:
        errors.append(
            status_failure(
                None, f"batch {batch.batch_id} ended {info.status}: {len(left)} request(s) not run"
            )
        )
        failed += sum(len(batch.items[c]) for c in left)
    if errors:
        report.failed += failed
        report.provider_error = report.provider_error or str(errors[0])
        record_embedding_failures(uow, work.run_id, collection, errors, failed)
    return errors
