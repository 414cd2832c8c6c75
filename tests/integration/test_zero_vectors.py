"""Vectors are checked at the door: an all-zero or non-finite vector from any provider is not
stored (the record is kept without a vector, counted, found by text and hybrid), and a NULL
distance never reaches a caller as a crash."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import RetryPolicy
from mempipe.domain.vectors import vector_problem
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.search import CandidateQuery, Near, ReadFilter, SearchMode
from mempipe.schemas.turn import Turn
from mempipe.services.embedding import embed_texts
from mempipe.services.reembed.fill import embed_collection
from mempipe.services.search import search

EMBEDDER = HashingEmbedder(64)
NOW = datetime(2024, 6, 1, tzinfo=UTC)
ZERO_WIDTH = "\u200b"
"""Real text that the hashing model maps to the zero vector (it has no token it keeps)."""


def test_the_check_names_zero_and_non_finite_vectors() -> None:
    assert vector_problem([0.0, 0.0]) == "all zeros"
    assert vector_problem([1.0, math.nan]) is not None
    assert vector_problem([1.0, math.inf]) is not None
    assert vector_problem([0.0, 0.5]) is None


def test_a_zero_vector_from_the_provider_is_a_missing_vector_with_a_content_failure() -> None:
    vectors, errors = embed_texts(
        EMBEDDER, ["hello there", ZERO_WIDTH, "general kenobi"], RetryPolicy(), lambda _: None
    )
    assert vectors[0] is not None
    assert vectors[1] is None
    assert vectors[2] is not None
    [(position, error)] = errors
    assert position == 1
    assert "all zeros" in str(error)


def turn(seq: int, content: str) -> Turn:
    return Turn(
        org_id="acme",
        project_id="support",
        user_id="maya",
        session_id="s1",
        turn_seq=seq,
        role="user",
        content=content,
        created_at=NOW,
        source={"path": "test.jsonl", "line": seq + 1},
    )


def test_a_turn_whose_embedding_is_all_zeros_is_kept_without_a_vector_and_every_mode_answers(
    store,
) -> None:
    store.add_turns(
        [turn(0, "my flight to Lisbon leaves at noon"), turn(1, ZERO_WIDTH), turn(2, "hello")],
        run_id="r",
    )
    report = embed_collection(
        UnitOfWork(store), "stm", EMBEDDER, run_id="r", batch_size=10, state="serving"
    )
    assert (report.records, report.vectors, report.unembeddable) == (3, 2, 1)
    assert store.failure_counts(None, None, None)

    scope = ReadFilter(org_id="acme", project_id="support", user_id="maya")
    for mode in SearchMode:
        found = search(
            UnitOfWork(store), lambda _: EMBEDDER, "flight Lisbon", "stm", mode, scope, 5
        )
        assert found.hits, mode
        assert all(math.isfinite(h.score) for h in found.hits)
    zero_query = search(
        UnitOfWork(store), lambda _: EMBEDDER, ZERO_WIDTH, "stm", SearchMode.SEMANTIC, scope, 5
    )
    assert zero_query.hits == [], "nothing is near a query without direction"


def test_a_zero_vector_already_stored_is_skipped_by_search_and_reconciliation(store) -> None:
    """Stores written before the check may hold one: sqlite-vec gives a NULL distance to it."""
    store.ensure_vector_table("semantic", EMBEDDER.model_id, EMBEDDER.dimensions)
    for n, vector in enumerate([[0.0] * 64, EMBEDDER.embed(["lisbon flight"])[0]]):
        store.add_memory(
            "semantic",
            SemanticMemory(
                id=f"m{n}",
                org_id="acme",
                project_id="support",
                user_id="maya",
                text=f"lisbon flight {n}",
                has_embedding=True,
                embedding_model_id=EMBEDDER.model_id,
                created_at=NOW,
                updated_at=NOW,
            ),
            vector,
        )
    scope = ReadFilter(org_id="acme", project_id="support", user_id="maya")
    for mode in (SearchMode.SEMANTIC, SearchMode.HYBRID):
        hits = search(
            UnitOfWork(store), lambda _: EMBEDDER, "lisbon flight", "semantic", mode, scope, 5
        ).hits
        assert all(math.isfinite(h.score) for h in hits)
        assert "m1" in {h.id for h in hits}
    semantic = search(
        UnitOfWork(store),
        lambda _: EMBEDDER,
        "lisbon flight",
        "semantic",
        SearchMode.SEMANTIC,
        scope,
        5,
    )
    assert [h.id for h in semantic.hits] == ["m1"]


@pytest.mark.parametrize("bad", [[0.0] * 64, [math.nan] * 64])
def test_memory_candidates_never_carry_a_null_similarity(store, bad) -> None:
    from mempipe.domain.scope import scope_of
    from mempipe.schemas.identity import Visibility

    store.ensure_vector_table("semantic", EMBEDDER.model_id, EMBEDDER.dimensions)
    store.add_memory(
        "semantic",
        SemanticMemory(
            id="zero",
            org_id="acme",
            project_id="support",
            user_id="maya",
            text="x",
            has_embedding=True,
            embedding_model_id=EMBEDDER.model_id,
            created_at=NOW,
            updated_at=NOW,
        ),
        bad,
    )
    scope = scope_of("acme", "support", "maya", None, Visibility.PRIVATE)
    near = Near(vector=EMBEDDER.embed(["x y"])[0], model_id=EMBEDDER.model_id)
    found = store.memory_candidates(
        CandidateQuery(memory_type="semantic", scope=scope, near=near, k=5)
    )
    assert all(c.similarity is not None and math.isfinite(c.similarity) for c in found)
