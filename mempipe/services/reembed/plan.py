"""A re-embed's plan (`reembed --plan`): every record still without a vector of the model,
in requests as the embedder cuts them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mempipe.adapters.embedding.openai_compat import BATCH as EMBEDDING_REQUEST_TEXTS
from mempipe.adapters.llm.tokens import embedding_counter
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.costs import cut_into_files
from mempipe.schemas.batch import BatchLimits
from mempipe.schemas.costs import CostConfig, RunPlan, Via
from mempipe.schemas.replay import LLMSettings
from mempipe.services.reembed.bridge import bridge_lines
from mempipe.services.reembed.fill import cut_source
from mempipe.services.run_plans import (
    Tally,
    cut_line,
    embedding_line,
    probe_line,
    request_chunks,
    run_plan,
)


def reembed_plan(
    uow: UnitOfWork,
    collections: Sequence[str],
    model_id: str,
    *,
    incremental: bool,
    batch_size: int,
    via: Via,
    costs: CostConfig,
    llm: LLMSettings,
    limits: BatchLimits,
    bridge: tuple[int, int] | None = None,
) -> RunPlan:
    """Every record still without a vector of the model the run fills (the serving one, for an
    incremental run), read in pages; each page cut into requests as the embedder cuts it.
    ``bridge`` (its sample and seed): the bridges fitted first, each its sample's texts."""
    sources = {c: None if incremental else cut_source(uow, c, model_id) for c in collections}
    lines = [] if sources and all(sources.values()) else [probe_line(model_id)]
    if bridge is not None:
        lines.extend(bridge_lines(uow, list(collections), model_id, *bridge))
    files = 0
    for collection in collections:
        target = model_id
        if incremental:
            serving = uow.models.active_embedding(collection)
            target = serving[0] if serving is not None else model_id
        counter = embedding_counter(target)
        tally = Tally(sizes=[] if via == "batch" else None)
        page_size = EMBEDDING_REQUEST_TEXTS if via == "batch" else batch_size
        source = sources[collection]
        if source is not None:  # cut from the vectors held; the embedder gets what they lack
            derived = uow.vectors.vector_counts(collection, source)[1]
            lines.append(cut_line(f"cut {collection}", target, derived))
        for page in _missing_texts(uow, collection, source or target, page_size):
            for texts in request_chunks(page, target):
                tally.add({"model": target, "input": texts}, len(texts), sum(counter.count(texts)))
        if not tally.items:
            continue
        if tally.sizes is not None:
            files += len(cut_into_files(tally.sizes, limits, embeddings=True))
        lines.append(embedding_line(f"embed {collection}", target, counter, tally))
    return run_plan("reembed", uow.url, via, lines, files, costs, llm, [])


def _missing_texts(
    uow: UnitOfWork, collection: str, model_id: str, batch_size: int
) -> Iterator[list[str]]:
    after = 0
    while batch := uow.vectors.records_missing_vectors(collection, model_id, after, batch_size):
        after = batch[-1][0]
        yield [text or "" for _, text in batch]
