"""build_context: ranked, near-duplicates dropped, whole chunks fitted after a 500-token
reserve."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.memory import EpisodicMemory, SemanticMemory
from mempipe.services.context import build_context, count_tokens
from mempipe.services.search import SearchError

EMBEDDER = HashingEmbedder(32)
NOW = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def memories(store):
    rows = [
        (SemanticMemory, "a", "User's home airport is LIS (Lisbon)."),
        (SemanticMemory, "b", "User's home airport is LIS, Lisbon."),
        (SemanticMemory, "c", "User prefers window seats on long flights to Lisbon."),
        (EpisodicMemory, "d", "User flew from Lisbon airport to Oslo in May " + "x " * 300),
    ]
    for model, memory_id, text in rows:
        kind = model.memory_type
        store.ensure_vector_table(kind, EMBEDDER.model_id, EMBEDDER.dimensions)
        record = model(
            id=memory_id,
            org_id="o",
            project_id="p",
            user_id="u",
            text=text,
            has_embedding=True,
            embedding_model_id=EMBEDDER.model_id,
            created_at=NOW,
            updated_at=NOW,
        )
        with store.write_transaction():
            store.add_memory(kind, record, EMBEDDER.embed([text])[0])
    return store


def context(store, max_tokens):
    return build_context(
        UnitOfWork(store), lambda _: EMBEDDER, "Lisbon airport", max_tokens=max_tokens
    )


def test_near_duplicates_are_dropped_and_sources_are_merged(memories) -> None:
    result = context(memories, None)
    ids = [hit.id for hit in result.selected]
    assert len({"a", "b"} & set(ids)) == 1
    assert {"c", "d"} <= set(ids)
    assert {hit.source for hit in result.selected} == {"semantic", "episodic"}


def test_whole_chunks_fit_after_the_500_token_reserve(memories) -> None:
    assert context(memories, 500).selected == [], "at or below 500 there is no room"
    small = context(memories, 540)
    assert "d" not in {hit.id for hit in small.selected}, "the long chunk does not fit whole"
    assert 0 < small.token_count <= 40
    assert small.token_count == count_tokens(small.context)


def test_a_budget_must_be_positive(memories) -> None:
    with pytest.raises(SearchError, match="positive"):
        context(memories, 0)
