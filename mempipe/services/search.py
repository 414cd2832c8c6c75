"""Retrieval in three modes over turns (``stm``) and every memory type.

``semantic`` compares vectors (the query embedded with the collection's active model), ``text``
matches words (FTS5, BM25), ``hybrid`` fuses both rankings (reciprocal rank fusion), so a record
without a vector is still found by text and hybrid. The identity filter is part of every query.
"""

from __future__ import annotations

from collections.abc import Callable

from mempipe.adapters.embedding import Embedder
from mempipe.adapters.store import Store
from mempipe.domain.fusion import reciprocal_rank_fusion
from mempipe.errors import TerminalError
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.search import STM, Hit, ReadFilter, SearchMode, SearchResult

SOURCES = (STM, *(t.value for t in MemoryType))
CANDIDATES = 50


class SearchError(TerminalError):
    """A read that cannot be answered as asked (never an empty result instead)."""


def search(
    store: Store,
    embedder_for: Callable[[str], Embedder],
    query: str,
    source: str,
    mode: SearchMode,
    filters: ReadFilter,
    top_k: int = 10,
) -> SearchResult:
    if source not in SOURCES:
        raise SearchError(f"unknown source {source!r}; known: {', '.join(SOURCES)}")
    if source == STM and filters.visibility is not None:
        raise SearchError("turns (stm) have no visibility: leave --visibility out")
    pool = max(top_k, CANDIDATES) if mode is SearchMode.HYBRID else top_k
    text_hits = (
        store.search_text(source, query, filters, pool) if mode is not SearchMode.SEMANTIC else []
    )
    vector_hits = (
        _vector_hits(
            store, embedder_for, query, source, filters, pool, required=mode is SearchMode.SEMANTIC
        )
        if mode is not SearchMode.TEXT
        else []
    )
    if mode is SearchMode.HYBRID:
        by_id: dict[str, Hit] = {h.id: h for h in (*vector_hits, *text_hits)}
        fused = reciprocal_rank_fusion([[h.id for h in text_hits], [h.id for h in vector_hits]])
        hits = [by_id[i].model_copy(update={"score": score}) for i, score in fused[:top_k]]
    else:
        hits = (text_hits or vector_hits)[:top_k]
    return SearchResult(query=query, source=source, mode=mode, hits=hits)


def _vector_hits(
    store: Store,
    embedder_for: Callable[[str], Embedder],
    query: str,
    source: str,
    filters: ReadFilter,
    k: int,
    *,
    required: bool,
) -> list[Hit]:
    active = store.active_embedding(source) if source != STM else None
    if active is None:
        if required and source == STM:
            raise SearchError("turns (stm) carry no vectors: search them with text or hybrid")
        return []
    model_id, dimensions = active
    embedder = embedder_for(model_id)
    if embedder.dimensions != dimensions:
        raise SearchError(
            f"{source}: the query embedder {embedder.model_id} gives {embedder.dimensions} "
            f"dimensions but the index holds {model_id} at {dimensions}"
        )
    (vector,) = embedder.embed([query])
    if vector is None:
        raise SearchError(f"the query could not be embedded by {model_id}")
    return store.search_vector(source, vector, model_id, filters, k)
