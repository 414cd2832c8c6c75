"""A move's bridge (``reembed --model NEW --bridge``): a map from the new model's query space
into the vectors that serve a collection now, fitted on a sample of its records (their stored
vectors, and the new model's vectors of their text on the query side, the side the map is fed
at search time). Kept in the registry beside the move, it answers searches the serving model
can no longer embed (:func:`mempipe.services.search.search`) until the switch retires it.

The sample's vectors are not kept: the map is a matrix and an offset
(:mod:`mempipe.domain.bridge`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from mempipe.adapters.embedding import Embedder, Vector
from mempipe.adapters.llm.tokens import embedding_counter
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain import bridge as maps
from mempipe.domain.failures import RetryPolicy
from mempipe.errors import ConfigError, IncompleteRunError
from mempipe.schemas.costs import PlanLine
from mempipe.schemas.embedding import Bridge
from mempipe.services.reembed.preview import draw_sample, drawn_records
from mempipe.services.run_plans import Tally, count_page, embedding_line

BRIDGE_PAIRS = 2000
"""Records a bridge is fitted on unless told: where the dev set's curve flattens (BENCHMARKS.md,
"A bridge while the old model is gone")."""


class QuerySide:
    """An embedder whose documents are embedded as queries: the pairs a bridge is fitted on
    are what it maps at search time, a query's vector."""

    def __init__(self, inner: Embedder) -> None:
        self.model_id, self.dimensions, self.symmetric = inner.model_id, inner.dimensions, True
        self._inner = inner

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        return self._inner.embed_query(texts)

    def embed_query(self, texts: Sequence[str]) -> list[Vector | None]:
        return self._inner.embed_query(texts)


def fitted_bridge(
    uow: UnitOfWork,
    collection: str,
    embedder: Embedder,
    *,
    pairs: int,
    seed: int,
    retry: RetryPolicy,
) -> Bridge | None:
    """The collection's bridge from ``embedder``'s model into its serving model's vectors, kept
    in the registry (one already kept for the same model, sample and seed is reused: a resumed
    move pays for no second sample); None where no other model serves the collection."""
    serving = uow.models.active_embedding(collection)
    if serving is None or serving[0] == embedder.model_id:
        return None
    model_id, dimensions = serving
    kept = _kept(uow, collection, (model_id, dimensions, embedder.model_id, pairs, seed))
    if kept is not None:
        return kept
    drawn = draw_sample(uow, collection, model_id, pairs, seed, set(), QuerySide(embedder), retry)
    if drawn.provider_error is not None:
        raise IncompleteRunError(
            f"{collection}: no bridge fitted: {drawn.failed} sampled record(s) got no vector "
            f"of {embedder.model_id}: {drawn.provider_error}"
        )
    both = [
        (new, record.vector)
        for record, new in zip(drawn.records, drawn.new, strict=True)
        if new is not None and record.vector is not None
    ]
    if len(both) < maps.MIN_PAIRS:
        raise ConfigError(
            f"{collection}: {len(both)} record(s) carry both models' vectors; a bridge is fitted "
            f"on at least {maps.MIN_PAIRS} (ask for more with --sample)"
        )
    source = np.asarray([new for new, _ in both], dtype=np.float64)
    target = np.asarray([old for _, old in both], dtype=np.float64)
    bridge = Bridge(
        collection=collection,
        serving_model=model_id,
        query_model=embedder.model_id,
        sample=pairs,
        pairs=len(both),
        seed=seed,
        source_dims=source.shape[1],
        target_dims=dimensions,
        held_out_cosine=round(maps.held_out_cosine(source, target), 6),
        fitted_at=datetime.now(UTC),
        weights=maps.weights_bytes(maps.fit_affine(source, target)),
    )
    uow.models.keep_bridge(bridge)
    return bridge


def bridge_lines(
    uow: UnitOfWork, collections: list[str], model_id: str, pairs: int, seed: int
) -> list[PlanLine]:
    """What fitting each collection's bridge sends: the very records the fit will draw (the
    same seed draws the same), on the model's query side; nothing where a bridge fitted with
    the same ask is kept, or no other model serves."""
    lines = []
    counter = embedding_counter(model_id)
    for collection in collections:
        serving = uow.models.active_embedding(collection)
        if serving is None or serving[0] == model_id:
            continue
        if _kept(uow, collection, (*serving, model_id, pairs, seed)) is not None:
            continue
        records, _, _ = drawn_records(uow, collection, None, pairs, seed, set())
        tally = Tally()
        count_page(tally, [r.text for r in records], model_id, counter, query=True)
        lines.append(embedding_line(f"fit the bridge of {collection}", model_id, counter, tally))
    return lines


def _kept(uow: UnitOfWork, collection: str, asked: tuple[str, int, str, int, int]) -> Bridge | None:
    return next(
        (b for b in uow.models.bridges() if b.collection == collection and b.asked == asked), None
    )
