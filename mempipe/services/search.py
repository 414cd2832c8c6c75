"""Retrieval in three modes over turns (``stm``) and every memory type.

``semantic`` compares vectors (the query embedded with the collection's active model), ``text``
matches words (the store's text index), ``hybrid`` fuses both rankings (reciprocal rank
fusion), so a record without a vector is still found by text and hybrid. The identity filter is
part of every query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from mempipe.adapters.embedding import Embedder, Vector, embedder_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.bridge import mapped_query
from mempipe.domain.declarations import column_for
from mempipe.domain.partition_keys import METADATA_PREFIX, filter_path
from mempipe.domain.query import query_words
from mempipe.domain.retention import expiry_of
from mempipe.domain.vectors import vector_problem
from mempipe.errors import MempipeError, TerminalError
from mempipe.retention import policy_in_force
from mempipe.schemas.embedding import BridgeUse
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.search import (
    STM,
    Hit,
    Near,
    ReadFilter,
    SearchMode,
    SearchResult,
    collection_of,
)
from mempipe.services.embedding import take_recorded_options

SOURCES = (STM, *(t.value for t in MemoryType))
CANDIDATES = 50
"""Records each list of a hybrid search brings to the fusion."""


@dataclass(frozen=True)
class QueryVector:
    vector: Vector
    model_id: str
    bridge: BridgeUse | None


class SearchError(TerminalError):
    """A read that cannot be answered as asked (never an empty result instead)."""


def search(
    uow: UnitOfWork,
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
    if not query.strip():
        raise SearchError("the query is empty: give the words or question to search for")
    uow.schema.require_search("search")
    notes: list[str] = []
    bridge = None
    if not query_words(query):
        if mode is SearchMode.TEXT:
            raise SearchError(
                f"{query!r} holds only stop words, which text search does not match: add a word "
                "that carries meaning, or search with --mode semantic"
            )
        if mode is SearchMode.HYBRID:
            notes.append(f"{query!r} holds only stop words: ranked by meaning alone")
    known = (*SOURCES, *uow.schema.custom_types)
    if source not in known:
        raise SearchError(f"unknown source {source!r}; known: {', '.join(known)}")
    if source == STM and filters.visibility is not None:
        raise SearchError("turns (stm) have no visibility: leave --visibility out")
    check_metadata_filters(filters, uow.schema.partition_keys)
    if mode is SearchMode.TEXT:
        hits = _unexpired(
            uow, source, top_k, notes, lambda n: uow.search.search_text(source, query, filters, n)
        )
    else:
        found = _query_vector(
            uow,
            embedder_for,
            query,
            source,
            filters,
            model_id,
            required=mode is SearchMode.SEMANTIC,
        )
        near = Near(vector=found.vector, model_id=found.model_id) if found else None
        bridge = found.bridge if found else None
        if mode is SearchMode.HYBRID:
            hits = _unexpired(
                uow,
                source,
                top_k,
                notes,
                lambda n: uow.search.search_hybrid(
                    source, query, near, filters, n, max(n, CANDIDATES)
                ),
            )
        elif near is None:
            hits = []
        else:
            hits = _unexpired(
                uow,
                source,
                top_k,
                notes,
                lambda n: uow.search.search_vector(source, near, filters, n),
            )
    return SearchResult(
        query=query, source=source, mode=mode, hits=hits, notes=notes, bridge=bridge
    )


def _unexpired(
    uow: UnitOfWork, source: str, k: int, notes: list[str], fetch: Callable[[int], list[Hit]]
) -> list[Hit]:
    """The top ``k`` of what the retention policy in force has not expired, whether or not
    ``mempipe forget`` has run: asked for twice as many while expired ones leave fewer than
    ``k`` and more may be found."""
    policy = policy_in_force()
    if policy is None:
        return fetch(k)
    expiry = expiry_of(policy, datetime.now(UTC))
    asked = k
    while True:
        hits = fetch(asked)
        expired = uow.retention.expired_among(source, hits, expiry)
        kept = [h for h in hits if h.id not in expired]
        if len(kept) >= k or len(hits) < asked:
            if expired:
                notes.append(
                    f"{len(expired)} record(s) the retention policy has expired were left out "
                    "(mempipe forget removes them)"
                )
            return kept[:k]
        asked *= 2


def find(
    uow: UnitOfWork,
    query: str,
    source: str,
    mode: str,
    top_k: int,
    metadata: dict[str, str],
    **scope: str | None,
) -> SearchResult:
    """``mempipe search``: ``query`` in ``source`` within ``scope`` (the identity, session and
    visibility options) and ``metadata``, by the models the registry serves."""
    filters = ReadFilter(**scope, metadata=metadata)
    return search(uow, embedder_for, query, source, SearchMode(mode), filters, top_k)


def check_metadata_filters(filters: ReadFilter, declared: tuple[str, ...]) -> None:
    """Filters name declared partition keys by their qualified path; anything else is refused
    with the paths that are accepted."""
    accepted = ", ".join(filter_path(key) for key in declared) or "none"
    for path in filters.metadata:
        if not path.startswith(METADATA_PREFIX):
            raise SearchError(
                f"filter on {path!r}: filter by the qualified path; accepted: {accepted}"
            )
        if path.removeprefix(METADATA_PREFIX) not in declared:
            raise SearchError(
                f"{path!r} is not a partition key the store holds; accepted: {accepted}. A key "
                "declared in memory.metadata_partition_keys since the store last recorded its "
                "configuration: `mempipe rebuild-indexes` records it and says what to rebuild"
            )


def _query_vector(
    uow: UnitOfWork,
    embedder_for: Callable[[str], Embedder],
    query: str,
    source: str,
    filters: ReadFilter,
    model_id: str | None,
    *,
    required: bool,
) -> QueryVector | None:
    """The query embedded with the collection's serving model (or ``model_id``), and that
    model; None when the collection has no vectors yet. Where that model cannot embed it
    (its provider down, the model unknown, its key refused) and a bridge into it is fitted,
    the bridge's model embeds it, mapped into the serving model's space, and says so."""
    collection = collection_of(source)
    active = uow.models.active_embedding(collection)
    if model_id is not None:
        entry = next(
            (
                e
                for e in uow.models.registry()
                if e.collection == collection and e.model_id == model_id
            ),
            None,
        )
        active = (entry.model_id, entry.dimensions) if entry else None
    if active is None:
        if required and source == STM:
            raise SearchError(
                "turns (stm) carry no vectors yet: embed them with `mempipe reembed "
                "--incremental`, or search them with text or hybrid"
            )
        return None
    index_model = active[0]
    columns = uow.vectors.vector_columns(collection, index_model)
    missing = [
        p for p in filters.metadata if column_for(p.removeprefix(METADATA_PREFIX)) not in columns
    ]
    if missing:
        raise SearchError(
            f"the {source} vector index does not cover {', '.join(missing)} yet (declared after "
            "it was built): run `mempipe rebuild-indexes --force`"
        )
    try:
        vector, bridged = _embedded_query(uow, embedder_for, query, source, active), None
    except SearchError:
        raise
    except MempipeError as failure:  # the serving model cannot embed: its bridge, if fitted
        vector, bridged = _bridged_query(uow, embedder_for, query, collection, active, failure)
    if vector is None:
        raise SearchError(f"the query could not be embedded by {index_model}")
    if vector_problem(vector) is not None:
        return None  # nothing is near a vector without direction: semantic finds nothing
    return QueryVector(vector=vector, model_id=index_model, bridge=bridged)


def _embedded_query(
    uow: UnitOfWork,
    embedder_for: Callable[[str], Embedder],
    query: str,
    source: str,
    active: tuple[str, int],
) -> Vector | None:
    index_model, dimensions = active
    take_recorded_options(uow, index_model)
    embedder = embedder_for(index_model)
    if embedder.dimensions != dimensions:
        raise SearchError(
            f"{source}: the query embedder {embedder.model_id} gives {embedder.dimensions} "
            f"dimensions but the index holds {index_model} at {dimensions}"
        )
    (vector,) = embedder.embed_query([query])
    return vector


def _bridged_query(
    uow: UnitOfWork,
    embedder_for: Callable[[str], Embedder],
    query: str,
    collection: str,
    active: tuple[str, int],
    failure: MempipeError,
) -> tuple[Vector | None, BridgeUse]:
    """The query embedded by the bridge's model and mapped into the serving model's space; the
    serving model's failure raised where no bridge into it is fitted."""
    fitted = (b for b in uow.models.bridges() if b.collection == collection)
    bridge = next((b for b in fitted if b.serving_model == active[0]), None)
    if bridge is None or bridge.target_dims != active[1]:
        raise failure
    take_recorded_options(uow, bridge.query_model)
    (vector,) = embedder_for(bridge.query_model).embed_query([query])
    use = BridgeUse(
        collection=collection,
        serving_model=bridge.serving_model,
        query_model=bridge.query_model,
        reason=str(failure),
    )
    if vector is None:
        return None, use
    return mapped_query(bridge.weights, bridge.source_dims, bridge.target_dims, vector), use
