"""A plan's arithmetic: prices from the table (the configuration's over the defaults), a local
line free, an unpriced model named rather than guessed; durations at the configured limits;
batch files cut within every limit."""

from __future__ import annotations

import pytest

from mempipe.adapters.llm.tokens import (
    ChatMessage,
    chat_counter,
    chat_tokens,
    embedding_counter,
)
from mempipe.domain.costs import cut_into_files, plan_cost, plan_duration
from mempipe.schemas.batch import BatchLimits
from mempipe.schemas.config import ProjectConfig
from mempipe.schemas.costs import DEFAULT_PRICES, PlanLine


def line(model: str, tokens_in: int, tokens_out: int = 0, provider: bool = True) -> PlanLine:
    return PlanLine(
        purpose="p",
        model=model,
        tokenizer="t",
        items=1,
        requests=1,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        provider=provider,
    )


def test_cost_is_tokens_times_price_and_batch_is_the_ratio_of_it() -> None:
    lines = [
        line("openai:text-embedding-3-small:1536", 1_000_000),
        line("gpt-4o-mini", 2_000_000, 500_000),
        line("all-MiniLM-L6-v2", 9_000_000, provider=False),
    ]
    cost = plan_cost(lines, DEFAULT_PRICES)
    assert cost.live_usd == pytest.approx(0.02 + 0.30 + 0.30)
    assert cost.batch_usd == pytest.approx(cost.live_usd / 2)
    unpriced = plan_cost([*lines, line("openai:house-model:64", 10)], DEFAULT_PRICES)
    assert (unpriced.live_usd, unpriced.unpriced_models) == (None, ["openai:house-model:64"])


def test_the_configuration_overrides_or_adds_a_models_price_and_keeps_the_rest() -> None:
    config = ProjectConfig.model_validate(
        {"costs": {"prices": {"gpt-4o-mini": {"input_per_million": 1.0, "batch_ratio": 0.25}}}}
    )
    prices = config.costs.prices
    assert prices["gpt-4o-mini"].input_per_million == 1.0
    assert prices["text-embedding-3-small"] == DEFAULT_PRICES["text-embedding-3-small"]
    assert plan_cost([line("gpt-4o-mini", 1_000_000)], prices).batch_usd == pytest.approx(0.25)


def test_duration_is_the_slower_of_the_two_limits() -> None:
    assert plan_duration(3000, 100_000, 1000, 1_000_000).live_seconds == 180.0
    assert plan_duration(3000, 100_000, None, 10_000).live_seconds == 600.0
    assert plan_duration(3000, 100_000, None, None).live_seconds is None


def test_files_close_before_a_request_that_would_break_any_limit() -> None:
    limits = BatchLimits(max_requests=3, max_bytes=2048, max_embedding_inputs=500)
    assert cut_into_files([(10, 1)] * 7, limits, embeddings=False) == [3, 3, 1]
    assert cut_into_files([(1000, 1)] * 5, limits, embeddings=False) == [2, 2, 1]
    assert cut_into_files([(10, 256)] * 4, limits, embeddings=True) == [1, 1, 1, 1]
    assert cut_into_files([(10, 256)] * 4, limits, embeddings=False) == [3, 1]
    assert cut_into_files([], limits, embeddings=True) == []


def test_tokens_are_counted_offline_by_each_models_own_tokenizer() -> None:
    small = embedding_counter("openai:text-embedding-3-small")
    assert small.name == "cl100k_base"
    assert small.count(["hello world", "I prefer aisle seats."]) == [2, 5]
    assert chat_counter("gpt-4o-mini").name == "o200k_base"
    assert chat_counter("a-compatible-servers-model").name == "o200k_base"
    assert embedding_counter("all-MiniLM-L6-v2").count(["hello world"]) == [4], (
        "WordPiece with its [CLS] and [SEP]"
    )
    counter = chat_counter("gpt-4o-mini")
    messages = [ChatMessage(role="system", content="hi"), ChatMessage(role="user", content="yo")]
    assert chat_tokens(counter, messages) == sum(counter.count(["hi", "yo"])) + 3 * 3
