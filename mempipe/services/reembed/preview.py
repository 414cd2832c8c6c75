"""A move's preview (``reembed --model NEW --preview``): a sample of each collection embedded
with the new model through the provider path a move takes (retries, breaker, budgets, spend
counted), compared with the serving model's stored vectors, and nothing written.

With labelled queries the recall gate is predicted: each model's recall@k over the whole
collection, estimated from the sample's ranks (:mod:`mempipe.domain.recall_estimate`), the
sample holding every record a query names. Without them the neighbour agreement says how much
of each record's neighbourhood the new model keeps; it needs no labels.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mempipe import spend
from mempipe.adapters.embedding import Embedder
from mempipe.adapters.llm.tokens import embedding_counter
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import RetryPolicy
from mempipe.domain.recall_estimate import heavy_tailed, query_recall
from mempipe.errors import InterruptedRunError, MempipeError
from mempipe.interrupts import stop_requested, stop_signal
from mempipe.progress import track
from mempipe.schemas.costs import CostConfig, PlanLine, RunPlan
from mempipe.schemas.evaluation import EvalQuery, QueryFile
from mempipe.schemas.reembed import CollectionPreview, GatePreview, ReembedPreview, SampledRecord
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.search import SearchMode
from mempipe.services.embedding import embed_texts, store_embedder
from mempipe.services.evaluation import PrefetchedEmbedder, evaluate
from mempipe.services.run_plans import Tally, count_page, embedding_line, run_plan

PAGE = 5000
"""Record references read per page while the sample is drawn (the draw holds only the sample)."""
EMBED_BATCH = 256
NEIGHBOURS = 10
FILTERS = ("org_id", "project_id", "user_id", "agent_id", "session_id", "visibility")
"""A labelled query's filters, matched against a sampled record's identity."""


@dataclass(frozen=True)
class GateAsk:
    """The recall gate a preview predicts: its queries, the collection they search, the ratio
    the new model must keep."""

    queries: QueryFile
    source: str
    min_ratio: float
    k: int = 10


@dataclass
class Drawn:
    """A collection's sample: its records with both models' vectors, and the chance each
    unnamed record had to be drawn."""

    records: list[SampledRecord]
    new: list[list[float] | None]
    failed: int
    provider_error: MempipeError | None
    fraction: float
    total: int


def preview_move(
    uow: UnitOfWork,
    collections: Sequence[str],
    embedder: Embedder,
    *,
    sample: int,
    seed: int,
    gate: GateAsk | None,
    retry: RetryPolicy,
    plan: RunPlan,
    costs: CostConfig,
    llm: LLMSettings,
) -> ReembedPreview:
    """What moving ``collections`` to ``embedder``'s model would do, from a sample of each."""
    started = time.perf_counter()
    spend.take(spend.PROCESS)
    tally, counter = Tally(), embedding_counter(embedder.model_id)
    previews: list[CollectionPreview] = []
    predicted: GatePreview | None = None
    lines: list[PlanLine] = []
    for collection in collections:
        serving = uow.models.serving_model(collection)
        named = _named(gate) if gate is not None and gate.source == collection else set()
        drawn = draw_sample(uow, collection, serving, sample, seed, named, embedder, retry)
        count_page(tally, [r.text for r in drawn.records], embedder.model_id, counter)
        previews.append(_collection_preview(collection, serving, drawn))
        if named and serving is not None and gate is not None:
            predicted = _gate(uow, gate, serving, embedder, drawn)
            lines = _query_lines(gate, serving, embedder.model_id)
    lines.insert(0, embedding_line("embed the sample", embedder.model_id, counter, tally))
    return ReembedPreview(
        store=uow.url,
        model=embedder.model_id,
        dimensions=embedder.dimensions,
        sample=sample,
        seed=seed,
        collections=previews,
        gate=predicted,
        spent=spend.take(spend.PROCESS),
        sample_plan=run_plan("reembed", uow.url, "live", lines, 0, costs, llm, []),
        plan=plan,
        seconds=round(time.perf_counter() - started, 3),
    )


def _query_lines(gate: GateAsk, serving: str, model_id: str) -> list[PlanLine]:
    """The gate's queries, embedded on the query side by the serving model and the new one."""
    lines = []
    for model in (serving, model_id):
        tally, counter = Tally(), embedding_counter(model)
        count_page(tally, [q.query for q in gate.queries.queries], model, counter, query=True)
        lines.append(embedding_line(f"embed the gate's queries ({model})", model, counter, tally))
    return lines


def _named(gate: GateAsk) -> set[str]:
    return {ref for query in gate.queries.queries for ref in query.relevant_ids}


def draw_sample(
    uow: UnitOfWork,
    collection: str,
    serving: str | None,
    size: int,
    seed: int,
    named: set[str],
    embedder: Embedder,
    retry: RetryPolicy,
) -> Drawn:
    """Every record ``named`` and ``size`` of the others (:func:`drawn_records`), with their
    stored vectors and the new model's."""
    records, fraction, total = drawn_records(uow, collection, serving, size, seed, named)
    new, failed, error = _embedded(embedder, [r.text for r in records], retry, collection)
    return Drawn(records, new, failed, error, fraction, total)


def drawn_records(
    uow: UnitOfWork, collection: str, serving: str | None, size: int, seed: int, named: set[str]
) -> tuple[list[SampledRecord], float, int]:
    """Every record ``named`` (a hit's id or a turn's message id), and ``size`` of the others
    drawn with ``seed`` by a reservoir over the collection's pages, with their stored vectors
    of ``serving``; the chance each unnamed record had, and the collection's size. The same
    seed draws the same records (a plan counts what the run will send)."""
    rng = random.Random(seed)
    chosen: list[int] = []
    kept: list[int] = []
    others = 0
    after = 0
    while page := uow.vectors.record_refs(collection, after, PAGE):
        after = page[-1][0]
        for rowid, hit_id, message_id in page:
            if hit_id in named or (message_id is not None and message_id in named):
                chosen.append(rowid)
                continue
            others += 1
            if len(kept) < size:
                kept.append(rowid)
            elif (slot := rng.randrange(others)) < size:
                kept[slot] = rowid
    rowids = sorted(chosen + kept)
    records = [
        record
        for start in range(0, len(rowids), PAGE)
        for record in uow.vectors.sampled_records(collection, serving, rowids[start : start + PAGE])
    ]
    fraction = len(kept) / others if others else 1.0
    return records, fraction, others + len(chosen)


def _embedded(
    embedder: Embedder, texts: list[str], retry: RetryPolicy, collection: str
) -> tuple[list[list[float] | None], int, MempipeError | None]:
    """The texts' vectors; how many the provider's failure left without one (retried under
    the policy first), and its first error: after a batch it failed, nothing more is sent."""
    vectors: list[list[float] | None] = []
    failed, first = 0, None
    with track(f"preview {collection}", len(texts), "records") as bar:
        for start in range(0, len(texts), EMBED_BATCH):
            if stop_requested():  # a preview writes nothing: it stops after the batch in flight
                signum = stop_signal() or signal.SIGTERM
                raise InterruptedRunError(
                    f"the preview stopped by {signal.Signals(signum).name}; nothing was written",
                    None,
                    signum,
                )
            batch = texts[start : start + EMBED_BATCH]
            if first is not None:
                vectors.extend([None] * len(batch))
                failed += len(batch)
                continue
            found, errors = embed_texts(embedder, batch, retry, time.sleep)
            vectors.extend(found)
            provider = [error for _, error in errors if error.retryable]
            failed, first = failed + len(provider), first or (provider[0] if provider else None)
            bar.update(len(vectors))
    return vectors, failed, first


def _collection_preview(collection: str, serving: str | None, drawn: Drawn) -> CollectionPreview:
    missing = sum(v is None for v in drawn.new)
    return CollectionPreview(
        collection=collection,
        serving_model=serving,
        records=drawn.total,
        sampled=len(drawn.records),
        unembeddable=missing - drawn.failed,
        failed=drawn.failed,
        provider_error=None if drawn.provider_error is None else str(drawn.provider_error),
        neighbour_agreement=None if serving is None else neighbour_agreement(drawn),
    )


def neighbour_agreement(drawn: Drawn, k: int = NEIGHBOURS) -> float | None:
    """The mean share of each record's ``k`` nearest, among its user's sampled records, that
    the two models agree on; None where no user has more than ``k`` records with both."""
    by_user: dict[str | None, list[int]] = {}
    for position, record in enumerate(drawn.records):
        if record.vector is not None and drawn.new[position] is not None:
            by_user.setdefault(record.hit.user_id, []).append(position)
    shares: list[float] = []
    for positions in by_user.values():
        if len(positions) <= k:
            continue
        old = _nearest(_unit([drawn.records[p].vector for p in positions]), k)
        new = _nearest(_unit([drawn.new[p] for p in positions]), k)
        shares.extend(len(set(a) & set(b)) / k for a, b in zip(old, new, strict=True))
    return round(float(np.mean(shares)), 6) if shares else None


def _nearest(vectors: np.ndarray, k: int) -> list[list[int]]:
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    return [list(row) for row in np.argsort(-similarity, axis=1)[:, :k]]


def _unit(vectors: Sequence[Any]) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _gate(
    uow: UnitOfWork, gate: GateAsk, serving: str, embedder: Embedder, drawn: Drawn
) -> GatePreview:
    """The serving model's recall measured (the gate's own search, a read); the new model's
    estimated from the sample, and the serving model's too, to show the estimate's error."""
    queries = gate.queries.queries
    texts = [q.query for q in queries]
    held = PrefetchedEmbedder(store_embedder(uow, serving), texts)  # asked once for both uses
    measured = evaluate(
        uow, lambda _: held, gate.queries, gate.source, SearchMode.SEMANTIC, [gate.k], serving
    ).result.recall
    old, old_heavy = _recall(
        queries, held.embed_query(texts), drawn, lambda p: drawn.records[p].vector, gate
    )
    new, new_heavy = _recall(
        queries, embedder.embed_query(texts), drawn, lambda p: drawn.new[p], gate
    )
    new = round(new, 6)
    ratio = new / measured if measured else (1.0 if new else 0.0)
    return GatePreview(
        source=gate.source,
        queries=len(queries),
        k=gate.k,
        old_recall=measured,
        new_recall=new,
        ratio=round(ratio, 6),
        min_ratio=gate.min_ratio,
        passes=ratio >= gate.min_ratio,
        old_recall_from_sample=round(old, 6),
        old_heavy_tailed=old_heavy,
        new_heavy_tailed=new_heavy,
    )


def _recall(
    queries: list[EvalQuery],
    vectors: Sequence[list[float] | None],
    drawn: Drawn,
    vector_of: Callable[[int], list[float] | None],
    gate: GateAsk,
) -> tuple[float, bool]:
    """The mean over the queries of each one's expected recall@k over the whole collection,
    and whether the model's scores were taken as heavy-tailed (read from all the queries'
    scopes at once)."""
    scopes: list[tuple[list[float], list[float], int]] = []
    for query, vector in zip(queries, vectors, strict=True):
        if vector is None:
            continue
        wanted = {f: getattr(query, f) for f in FILTERS if getattr(query, f) is not None}
        candidates = [
            p
            for p, r in enumerate(drawn.records)
            if r.searchable
            and vector_of(p) is not None
            and all(str(getattr(r.hit, f) or "") == str(v) for f, v in wanted.items())
        ]
        if not candidates:
            continue
        scores = (_unit([vector_of(p) for p in candidates]) @ _unit([vector])[0]).tolist()
        wanted_ids = set(query.relevant_ids)
        named = [
            drawn.records[p].hit.id in wanted_ids or drawn.records[p].hit.message_id in wanted_ids
            for p in candidates
        ]
        scopes.append(
            (
                [s for s, n in zip(scores, named, strict=True) if n],
                [s for s, n in zip(scores, named, strict=True) if not n],
                len(wanted_ids),
            )
        )
    heavy = heavy_tailed([distractors for _, distractors, _ in scopes])
    total = sum(
        query_recall(relevant, distractors, gate.k, drawn.fraction, named, heavy)
        for relevant, distractors, named in scopes
    )
    return (total / len(queries) if queries else 0.0), heavy
