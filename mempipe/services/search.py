"""Retrieval in three modes over turns (``stm``) and every memory type.

``semantic`` compares vectors (the query embedded with the collection's active model), ``text``
matches words (FTS5, BM25), ``hybrid`` fuses both rankings (reciprocal rank fusion), so a record
without a vector is still found by text and hybrid. The identity filter is part of every query.
"""

from __future__ import annotations

from collections.abc import Callable

from mempipe.adapters.embedding import Embedder
from mempipe.adapters.store import Store
from mempipe.domain.declarations import column_for
from mempipe.domain.fusion import reciprocal_rank_fusion
from mempipe.domain.partition_keys import METADATA_PREFIX, filter_path
from mempipe.errors import TerminalError
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.search import (
    STM,
    Hit,
    ReadFilter,
    SearchMode,
    SearchResult,
    collection_of,
)

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
    model_id: str | None = None,
) -> SearchResult:
    """``model_id`` searches the vectors of a model other than the serving one (a re-embed's
    recall gate compares the two)."""
    known = (*SOURCES, *store.custom_types)
    if source not in known:
        raise SearchError(f"unknown source {source!r}; known: {', '.join(known)}")
    if source == STM and filters.visibility is not None:
        raise SearchError("turns (stm) have no visibility: leave --visibility out")
    check_metadata_filters(filters, store.partition_keys)
    pool = max(top_k, CANDIDATES) if mode is SearchMode.HYBRID else top_k
    text_hits = (
        store.search_text(source, query, filters, pool) if mode is not SearchMode.SEMANTIC else []
    )
    vector_hits = (
        _vector_hits(
            store,
            embedder_for,
            query,
            source,
            filters,
            pool,
            model_id,
            required=mode is SearchMode.SEMANTIC,
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


def check_metadata_filters(filters: ReadFilter, declared: tuple[str, ...]) -> None:
    """Filters name declared partition keys by their qualified path; anything else is refused
    with the paths that are accepted."""
    accepted = ", ".join(filter_path(key) for key in declared) or "none: declare partition keys"
    for path in filters.metadata:
        if not path.startswith(METADATA_PREFIX):
            raise SearchError(
                f"filter on {path!r}: filter by the qualified path; accepted: {accepted}"
            )
        if path.removeprefix(METADATA_PREFIX) not in declared:
            raise SearchError(f"{path!r} is not a declared partition key; accepted: {accepted}")


def _vector_hits(
    store: Store,
    embedder_for: Callable[[str], Embedder],
    query: str,
    source: str,
    filters: ReadFilter,
    k: int,
    model_id: str | None,
    *,
    required: bool,
) -> list[Hit]:
    collection = collection_of(source)
    active = store.active_embedding(collection)
    if model_id is not None:
        entry = next(
            (e for e in store.registry() if e.collection == collection and e.model_id == model_id),
            None,
        )
        active = (entry.model_id, entry.dimensions) if entry else None
    if active is None:
        if required and source == STM:
            raise SearchError(
                "turns (stm) carry no vectors yet: embed them with `mempipe reembed "
                "--incremental`, or search them with text or hybrid"
            )
        return []
    index_model, dimensions = active
    embedder = embedder_for(index_model)
    if embedder.dimensions != dimensions:
        raise SearchError(
            f"{source}: the query embedder {embedder.model_id} gives {embedder.dimensions} "
            f"dimensions but the index holds {index_model} at {dimensions}"
        )
    columns = store.vector_columns(collection, index_model)
    missing = [
        p for p in filters.metadata if column_for(p.removeprefix(METADATA_PREFIX)) not in columns
    ]
    if missing:
        raise SearchError(
            f"the {source} vector index does not cover {', '.join(missing)} yet (declared after "
            "it was built): run `mempipe rebuild-indexes --force`"
        )
    (vector,) = embedder.embed([query])
    if vector is None:
        raise SearchError(f"the query could not be embedded by {index_model}")
    return store.search_vector(source, vector, index_model, filters, k)
