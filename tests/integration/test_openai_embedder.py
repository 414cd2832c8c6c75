"""The OpenAI-compatible embeddings provider through the real client against a local fake:
batching, the dimensions parameter, failure classes, and one refused text in a batch."""

from __future__ import annotations

from mempipe.adapters.embedding.openai_compat import OpenAIEmbedder
from mempipe.domain.failures import RetryPolicy
from mempipe.schemas.replay import LLMSettings
from mempipe.services.embedding import embed_texts
from tests.fakes.openai_server import Answer, error, fake_openai


def vectors(*rows: list[float]) -> Answer:
    return Answer(
        body={
            "object": "list",
            "model": "m",
            "data": [
                {"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)
            ],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
    )


def embedder(url: str, dimensions: int = 3) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "text-embedding-3-small", dimensions, LLMSettings(base_url=url, api_key="k")
    )


def test_batches_are_sent_with_the_dimensions_parameter() -> None:
    with fake_openai() as (fake, url):
        fake.script = [vectors([1.0, 0.0, 0.0], [0.0, 1.0, 0.0])]
        result = embedder(url).embed(["a", "b"])
    assert result == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert fake.requests[0]["dimensions"] == 3
    assert fake.requests[0]["input"] == ["a", "b"]


def test_a_rate_limited_batch_is_retried_after_retry_after() -> None:
    waits: list[float] = []
    with fake_openai() as (fake, url):
        fake.script = [error(429, "slow down", retry_after="2"), vectors([1.0, 0.0, 0.0])]
        found, errors = embed_texts(embedder(url), ["a"], RetryPolicy(), waits.append)
    assert (found, errors, waits) == ([[1.0, 0.0, 0.0]], [], [2.0])


def test_one_refused_text_costs_only_its_own_vector() -> None:
    with fake_openai() as (fake, url):
        fake.script = [
            error(400, "input is too long for this model"),
            vectors([1.0, 0.0, 0.0]),
            error(400, "input is too long for this model"),
            vectors([0.0, 0.0, 1.0]),
        ]
        found, errors = embed_texts(
            embedder(url), ["ok", "way too long", "fine"], RetryPolicy(), lambda s: None
        )
    assert found == [[1.0, 0.0, 0.0], None, [0.0, 0.0, 1.0]]
    assert [(position, e.kind) for position, e in errors] == [(1, "bad_request")]
    assert len(fake.requests) == 4, "one batch, then one request per text"


def test_a_vector_of_the_wrong_dimension_is_the_providers_failure() -> None:
    with fake_openai() as (fake, url):
        fake.script = [vectors([1.0, 0.0])]
        found, errors = embed_texts(embedder(url), ["a"], RetryPolicy(max_attempts=1), print)
    assert found == [None]
    assert "a vector of 2 dimensions, expected 3" in str(errors[0][1])
    assert errors[0][1].retryable, "not the text's fault: a later run tries it again"
