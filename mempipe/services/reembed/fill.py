"""Re-embedding, blue/green: new vectors are written beside the serving ones, verified, and
switched to in one transaction; the old ones stay until finalize (or come back on rollback).
Search answers with the serving model throughout.

Resumable by construction: each batch stores only the vectors still missing, so a run killed
anywhere and started again ends with exactly one vector per record and model.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from mempipe.adapters.embedding import Embedder, Vector
from mempipe.adapters.embedding.registry import cut_of
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import RetryPolicy, failure_class
from mempipe.domain.vectors import vector_problem
from mempipe.errors import MempipeError
from mempipe.interrupts import StopRequested, stop_requested
from mempipe.progress import track
from mempipe.schemas.bundle import BundleSelection, bundle_collection
from mempipe.schemas.embedding import ModelOptions, ModelRegistration, ModelState
from mempipe.schemas.evaluation import QueryFile
from mempipe.schemas.failure import Failure
from mempipe.schemas.reembed import CollectionReport, GateReport
from mempipe.schemas.search import SearchMode
from mempipe.services.embedding import embed_texts
from mempipe.services.evaluation import evaluate

"""What a re-embed embeds first, before anything is registered, to check the model answers."""
FAILED_BATCHES_IN_A_ROW = 3
"""A range stops after this many batches in a row that the provider failed (each after its
retries): the provider is down, and the records left are counted as not embedded."""

IdRange = tuple[int, int | None]
"""Record ids ``(after, until]``; ``until`` None is open-ended (records added meanwhile too)."""


def id_ranges(bounds: tuple[int, int] | None, parts: int) -> list[IdRange]:
    """``parts`` contiguous ranges covering the ids from ``bounds``, the last one open-ended."""
    if bounds is None or parts <= 1:
        return [(0, None)]
    low, high = bounds
    step = max(1, -(-(high - low + 1) // parts))
    starts = list(range(low - 1, high, step))
    return [(a, b) for a, b in zip(starts, [*starts[1:], None], strict=True)]


def target_state(uow: UnitOfWork, collection: str, model_id: str, *, incremental: bool) -> str:
    """Incremental fills the serving model's missing vectors; everything else (a move, and a
    collection's first model) is built beside what serves and switched to once complete, so a
    half-filled index never serves."""
    serving = uow.models.active_embedding(collection)
    if serving is not None and (incremental or serving[0] == model_id):
        return ModelState.SERVING.value
    return ModelState.BUILDING.value


def cut_source(uow: UnitOfWork, collection: str, model_id: str) -> str | None:
    """The collection's serving model, where ``model_id``'s vectors are a cut of its."""
    serving = uow.models.active_embedding(collection)
    return serving[0] if serving is not None and cut_of(serving[0], model_id) else None


def cut_collection(
    uow: UnitOfWork, collection: str, source: str, target: str, dimensions: int, batch_size: int
) -> int:
    """Give every record that has a ``source`` vector its ``target`` vector without a provider
    call: the first ``dimensions`` values, renormalized (what a Matryoshka model's provider
    returns for that size). Records the source has no vector for are left to the embedder.
    Idempotent: only missing vectors are written. Returns how many were written."""
    name, everything, written, after = bundle_collection(collection), BundleSelection(), 0, None
    while True:
        page, after = uow.transfer.export_vectors(name, source, everything, after, batch_size)
        if page:
            cut = np.asarray([vector for _, vector in page], dtype=np.float64)[:, :dimensions]
            cut /= np.maximum(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12)
            rowids = uow.transfer.record_rowids(name, [ref for ref, _ in page])
            derived = [
                (rowids[ref], row)
                for (ref, _), row in zip(page, cut.tolist(), strict=True)
                if ref in rowids and vector_problem(row) is None
            ]
            written += uow.vectors.set_vectors(collection, target, derived)
        if after is None:
            return written


def registration(
    collection: str, embedder: Embedder, state: str, options: ModelOptions | None = None
) -> ModelRegistration:
    """The embedder's model for the collection; ``options`` only where they differ from the
    defaults, so a model asked plainly records none."""
    return ModelRegistration(
        collection=collection,
        model_id=embedder.model_id,
        dimensions=embedder.dimensions,
        state=state,
        options=None if options == ModelOptions() else options,
    )


def registered(
    uow: UnitOfWork, collection: str, embedder: Embedder, state: str
) -> CollectionReport:
    """The collection's report as its move starts: the model registered for it (in ``state`` if
    new), and how many of its records already have a vector of it."""
    uow.vectors.register_model(registration(collection, embedder, state))
    records, vectors = uow.vectors.vector_counts(collection, embedder.model_id)
    return CollectionReport(
        collection=collection, model_id=embedder.model_id, records=records, vectors=vectors
    )


def embed_collection(
    uow: UnitOfWork,
    collection: str,
    embedder: Embedder,
    *,
    run_id: str,
    batch_size: int,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], Any] = time.sleep,
    state: str = ModelState.BUILDING.value,
    id_range: IdRange = (0, None),
) -> CollectionReport:
    """Give every record of the collection a vector of ``embedder``'s model, in batches. After
    each batch the run records a checkpoint; a run following one that crashed starts after
    that run's checkpoint, and sweeps what it skipped last: the checkpoint is a shortcut, not a
    promise (a rollback since may have dropped the vectors before it), so a run that ends has
    left no record without a vector that could be embedded, unless the provider failed: those
    are counted as ``failed`` and leave the collection incomplete."""
    report = registered(uow, collection, embedder, state)
    start, until = id_range
    checkpoint = f"embed:{collection}:{embedder.model_id}:{start}-{until or 'end'}"
    resumed = uow.runs.resume_point("reembed", checkpoint, run_id)
    report.resumed_after = resumed
    filler = _Filler(uow, collection, embedder, run_id, batch_size, retry or RetryPolicy(), sleep)
    with track(f"embed {collection}", report.records - report.vectors, "records") as progress:
        filler.fill((max(start, resumed or 0), until), report, progress, checkpoint)
        if resumed is not None and resumed > start:
            filler.fill((start, resumed), report, progress, checkpoint=None)
    report.records, report.vectors = uow.vectors.vector_counts(collection, embedder.model_id)
    return report


@dataclass
class _Filler:
    uow: UnitOfWork
    collection: str
    embedder: Embedder
    run_id: str
    batch_size: int
    policy: RetryPolicy
    sleep: Callable[[float], Any]
    done: int = 0

    def fill(
        self, id_range: IdRange, report: CollectionReport, progress: Any, checkpoint: str | None
    ) -> None:
        """Embed the records of ``id_range`` still without a vector; record how far it got
        under ``checkpoint`` after each batch (a sweep behind a checkpoint records nothing).
        The next batch is read and sent to the model before this one is written, so that the
        store's writes overlap the model's work; it is sent only while the run goes on (not
        after the provider's last allowed failure, nor once asked to stop)."""
        after, until = id_range
        model = self.embedder.model_id
        failed_in_a_row = 0
        with ThreadPoolExecutor(1, thread_name_prefix="mempipe-embed") as model_thread:
            batch = self._missing(after, until)
            embedding = None if stop_requested() else self._sent(model_thread, batch)
            while batch and embedding is not None:
                try:
                    found, errors = embedding.result()
                except StopRequested:
                    return
                provider = [error for _, error in errors if error.retryable]
                failed_in_a_row = failed_in_a_row + 1 if provider else 0
                going_on = failed_in_a_row < FAILED_BATCHES_IN_A_ROW and not stop_requested()
                following = self._missing(batch[-1][0], until) if going_on else []
                embedding = self._sent(model_thread, following)
                pairs = [
                    (rid, v) for (rid, _), v in zip(batch, found, strict=True) if v is not None
                ]
                report.embedded_now += self.uow.vectors.set_vectors(self.collection, model, pairs)
                report.failed += len(provider)
                if provider and report.provider_error is None:
                    report.provider_error = str(provider[0])
                report.unembeddable += len(batch) - len(pairs) - len(provider)
                for group in (provider, [error for _, error in errors if not error.retryable]):
                    if group:
                        self._record(group)
                if checkpoint is not None:
                    self.uow.runs.set_checkpoint(self.run_id, checkpoint, batch[-1][0])
                self.done += len(batch)
                progress.update(self.done)
                batch = following

    def _missing(self, after: int, until: int | None) -> list[tuple[int, str | None]]:
        return self.uow.vectors.records_missing_vectors(
            self.collection, self.embedder.model_id, after, self.batch_size, until
        )

    def _sent(
        self, model_thread: ThreadPoolExecutor, batch: list[tuple[int, str | None]]
    ) -> Future[tuple[list[Vector | None], list[tuple[int, MempipeError]]]] | None:
        """The batch's texts sent to the model on its own thread, in this run's context (the
        spend is counted to the run); None for no batch."""
        if not batch:
            return None
        texts = [text or "" for _, text in batch]
        return model_thread.submit(
            contextvars.copy_context().run,
            embed_texts,
            self.embedder,
            texts,
            self.policy,
            self.sleep,
        )

    def _record(self, errors: list[MempipeError]) -> None:
        record_embedding_failures(self.uow, self.run_id, self.collection, errors)


def record_embedding_failures(
    uow: UnitOfWork, run_id: str, collection: str, errors: list[MempipeError], records: int = 0
) -> None:
    """One failure row per batch and class: a provider's failure (retryable: the records are
    embeddable, the answer was not) apart from texts the provider refused. ``records``: how
    many records the errors left without a vector, where that is not one each."""
    first = errors[0]
    uow.audit.add_failure(
        Failure(
            run_id=run_id,
            step=f"reembed:{collection}",
            failure_class=failure_class(first),
            error_type=str(getattr(first, "kind", type(first).__name__)),
            error=f"{records or len(errors)} record(s) without a vector: {first}",
            attempts=getattr(first, "attempts", 1),
            at=datetime.now(UTC),
        )
    )


def recall_gate(
    uow: UnitOfWork,
    embedder_for: Callable[[str], Embedder],
    queries: QueryFile,
    new_model: str,
    min_ratio: float,
    k: int = 10,
    *,
    source: str = "semantic",
) -> GateReport | None:
    """Recall@k of the serving model and of the new one on the same queries, searched in
    ``source`` (semantic memories unless told; ``stm`` for queries labelled with turns); None
    when nothing serves yet, so there is nothing to be worse than."""
    serving = uow.models.active_embedding(source)
    if serving is None:
        return None
    old, new = (
        evaluate(uow, embedder_for, queries, source, SearchMode.SEMANTIC, [k], model).result
        for model in (serving[0], new_model)
    )
    ratio = new.recall / old.recall if old.recall else (1.0 if new.recall else 0.0)
    return GateReport(
        queries=old.queries,
        old_recall=old.recall,
        new_recall=new.recall,
        ratio=round(ratio, 6),
        min_ratio=min_ratio,
        passed=ratio >= min_ratio,
        old_bridged=old.bridged,
        bridge=old.bridge,
    )
