"""Provider answers are validated where they enter (DESIGN rule: what a provider returns is
validated; retries honour Retry-After up to a ceiling; no call waits without a deadline).

Every misbehaving mode of the fake endpoint, through the real ``openai`` client, becomes a
classified provider failure of that call (``invalid_response`` or the HTTP kind), retryable and
bounded, never an ``AttributeError`` or ``JSONDecodeError`` that aborts the run."""

from __future__ import annotations

import time

import pytest

from mempipe.adapters.embedding.openai_compat import OpenAIEmbedder
from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.domain.failures import PROVIDER_KINDS, EnvironmentalError, FailureKind, RetryPolicy
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import LLMSettings
from mempipe.services.embedding import embed_texts
from tests.fakes.openai_server import FAULTS, error, fake_openai, faulty
from tests.helpers import AIRPORT_SNAPSHOT

FAST = RetryPolicy(max_attempts=3, max_seconds=5, network_base=0, network_cap=0, retry_after_cap=0)

EMBEDDING_KINDS = {
    "500": FailureKind.SERVER,
    "hang": FailureKind.TIMEOUT,
    "429": FailureKind.RATE_LIMIT,
    "wrong-dimension": FailureKind.INVALID_RESPONSE,
    "nan": FailureKind.INVALID_RESPONSE,
    "short-list": FailureKind.INVALID_RESPONSE,
    "non-json": FailureKind.INVALID_RESPONSE,
    "text-plain": FailureKind.INVALID_RESPONSE,
}


def settings(url: str) -> LLMSettings:
    return LLMSettings(base_url=url, model="fake-model", api_key="k", timeout_seconds=0.5)


@pytest.mark.parametrize("fault", sorted(EMBEDDING_KINDS))
def test_each_faulty_embedding_answer_is_a_provider_failure_of_the_whole_batch(fault) -> None:
    waits: list[float] = []
    with fake_openai() as (fake, url):
        fake.responder = faulty(fault, 8, hang_s=2)
        embedder = OpenAIEmbedder("fake-embed", 8, settings(url))
        found, errors = embed_texts(embedder, ["a b", "c d", "e f"], FAST, waits.append)
    assert found == [None, None, None]
    kinds = {error.kind for _, error in errors}
    assert kinds == {EMBEDDING_KINDS[fault]}
    assert all(error.retryable for _, error in errors), "the texts are not to blame"
    assert kinds <= PROVIDER_KINDS
    assert len(fake.requests) == FAST.max_attempts, "retried, and only as often as allowed"


@pytest.mark.parametrize("fault", ["500", "non-json", "text-plain", "empty-choices"])
def test_each_faulty_chat_answer_is_a_retryable_provider_failure(fault) -> None:
    with fake_openai() as (fake, url):
        fake.responder = faulty(fault, 8)
        extractor = OpenAIExtractor(settings(url))
        with pytest.raises(EnvironmentalError) as caught:
            FAST.run(
                lambda: extractor.extract(AIRPORT_SNAPSHOT, MemoryType.SEMANTIC), lambda s: None
            )
    assert caught.value.kind in PROVIDER_KINDS
    assert caught.value.attempts == FAST.max_attempts
    assert "My home airport" not in str(caught.value), "no user text in an error"


def test_a_retry_after_beyond_the_ceiling_is_waited_only_up_to_it() -> None:
    waits: list[float] = []
    policy = RetryPolicy(max_attempts=2, max_seconds=600, retry_after_cap=7)
    with fake_openai() as (fake, url):
        fake.script = [error(429, "slow down", retry_after="100000")]
        embedder = OpenAIEmbedder("fake-embed", 8, settings(url))
        embed_texts(embedder, ["a"], policy, waits.append)
    assert waits == [7]


def test_no_wait_starts_that_would_end_past_the_deadline() -> None:
    waits: list[float] = []
    policy = RetryPolicy(max_attempts=10, max_seconds=5, retry_after_cap=60)
    with fake_openai() as (fake, url):
        fake.script = [error(429, "slow down", retry_after="30")]
        embedder = OpenAIEmbedder("fake-embed", 8, settings(url))
        _, errors = embed_texts(embedder, ["a"], policy, waits.append)
    assert waits == [], "a 30 s wait would end past the 5 s deadline: fail now instead"
    assert errors[0][1].kind is FailureKind.RATE_LIMIT


def test_a_hanging_endpoint_is_cut_off_by_the_call_timeout() -> None:
    with fake_openai() as (fake, url):
        fake.responder = faulty("hang", 8, hang_s=5)
        embedder = OpenAIEmbedder("fake-embed", 8, settings(url))
        started = time.monotonic()
        _, errors = embed_texts(embedder, ["a"], RetryPolicy(max_attempts=1), lambda s: None)
        elapsed = time.monotonic() - started
    assert errors[0][1].kind is FailureKind.TIMEOUT
    assert elapsed < 3, f"the 0.5 s timeout held the call {elapsed:.1f} s"


def test_the_fault_list_is_covered() -> None:
    assert set(EMBEDDING_KINDS) | {"empty-choices"} == set(FAULTS)
