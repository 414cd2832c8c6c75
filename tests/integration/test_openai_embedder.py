"""The OpenAI-compatible embeddings provider through the real client against a local fake:
batching, the dimensions parameter, failure classes, and one refused text in a batch."""

from __future__ import annotations

from mempipe.adapters.embedding.openai_compat import OpenAIEmbedder
from mempipe.domain.failures import RetryPolicy
from mempipe.schemas.embedding import ModelOptions, SideOptions
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


def test_declared_options_send_each_side_its_prefix_and_fields_and_the_dimension_by_its_name() -> (
    None
):
    """A Voyage-shaped model through the OpenAI client: ``input_type`` per side, the fields of
    every request, and the dimension under the name the provider gives it."""
    options = ModelOptions(
        query=SideOptions(prefix="query: ", fields={"input_type": "query"}),
        document=SideOptions(prefix="passage: ", fields={"input_type": "document"}),
        fields={"output_dtype": "float"},
        dimensions_parameter="output_dimension",
    )
    with fake_openai() as (fake, url):
        fake.script = [vectors([1.0, 0.0, 0.0]), vectors([0.0, 1.0, 0.0])]
        model = OpenAIEmbedder(
            "voyage-3.5", 3, LLMSettings(base_url=url, api_key="k"), options=options
        )
        assert not model.symmetric
        model.embed(["a seat by the window"])
        model.embed_query(["where does she sit?"])
    document, query = fake.requests
    assert document["input"] == ["passage: a seat by the window"]
    assert query["input"] == ["query: where does she sit?"]
    assert (document["input_type"], query["input_type"]) == ("document", "query")
    assert document["output_dimension"] == query["output_dimension"] == 3
    assert "dimensions" not in document
    assert document["output_dtype"] == "float"


def test_a_model_with_one_size_is_sent_no_dimension() -> None:
    with fake_openai() as (fake, url):
        fake.script = [vectors([1.0, 0.0, 0.0])]
        OpenAIEmbedder(
            "e5-small",
            3,
            LLMSettings(base_url=url, api_key="k"),
            options=ModelOptions(dimensions_parameter=None),
        ).embed(["a"])
    assert "dimensions" not in fake.requests[0]


def test_a_plan_counts_the_document_prefix_and_the_probe_of_both_sides(store) -> None:
    from mempipe.adapters.embedding.registry import declare_options
    from mempipe.adapters.llm.tokens import embedding_counter
    from mempipe.adapters.store.unit_of_work import UnitOfWork
    from mempipe.schemas.batch import BatchLimits
    from mempipe.schemas.costs import CostConfig
    from mempipe.services.reembed.plan import reembed_plan
    from tests.helpers import semantic_memory

    texts = ["Maya likes the window seat.", "Her passport expires in March."]
    with store.write_transaction():
        for n, text in enumerate(texts):
            store.add_memory("semantic", semantic_memory(f"m{n}", text, "maya"), None)
    model = "openai:voyage-3.5:1024"

    def plan() -> dict[str, tuple[int, int, int]]:
        planned = reembed_plan(
            UnitOfWork(store),
            ["semantic"],
            model,
            incremental=False,
            batch_size=256,
            via="live",
            costs=CostConfig(),
            llm=LLMSettings(),
            limits=BatchLimits(),
        )
        return {
            line.purpose: (line.items, line.requests, line.input_tokens) for line in planned.lines
        }

    counter = embedding_counter(model)
    bare = plan()
    declare_options(
        {
            model: ModelOptions(
                query=SideOptions(prefix="query: "), document=SideOptions(prefix="passage: ")
            )
        }
    )
    try:
        prefixed = plan()
    finally:
        declare_options({})
    assert bare["embed semantic"][2] == sum(counter.count(texts))
    assert prefixed["embed semantic"][2] == sum(counter.count([f"passage: {t}" for t in texts]))
    assert prefixed["embed semantic"][2] > bare["embed semantic"][2]
    assert (bare["probe"][:2], prefixed["probe"][:2]) == ((1, 1), (2, 2))
