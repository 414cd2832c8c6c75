"""The LLM extractor through the real openai client against a local fake endpoint: failure
classification, retry counts and waits, recorded failures (DESIGN rule: failure classes)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.domain.failures import ContentError, EnvironmentalError, FailureKind, RetryPolicy
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import LLMSettings
from tests.fakes.openai_server import Answer, completion, error, fake_openai, memories
from tests.helpers import AIRPORT_FACT, AIRPORT_SNAPSHOT

POLICY = RetryPolicy(max_attempts=4, max_seconds=60, network_base=0.5, rate_limit_default=3)


class Sleeps(list):
    """Records the waits instead of sleeping them."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@dataclass
class Outcome:
    result: list | None
    failure: EnvironmentalError | ContentError | None
    requests: list[dict]
    sleeps: Sleeps


def run(script: list[Answer], timeout: float = 5.0) -> Outcome:
    with fake_openai() as (fake, url):
        fake.script = script
        extractor = OpenAIExtractor(
            LLMSettings(base_url=url, model="fake-model", api_key="k", timeout_seconds=timeout)
        )
        sleeps = Sleeps()
        try:
            result = POLICY.run(
                lambda: extractor.extract(AIRPORT_SNAPSHOT, MemoryType.SEMANTIC), sleeps
            )
            return Outcome(result, None, fake.requests, sleeps)
        except (EnvironmentalError, ContentError) as exc:
            return Outcome(None, exc, fake.requests, sleeps)


def test_a_valid_structured_answer_becomes_memories() -> None:
    out = run([memories(AIRPORT_FACT)])
    assert out.failure is None
    assert [(m.text, m.label) for m in out.result] == [
        ("User's home airport is LIS.", "home_airport")
    ]
    request = out.requests[0]
    assert request["response_format"]["type"] == "json_schema"
    assert "memories" in request["response_format"]["json_schema"]["schema"]["properties"]
    assert "My home airport is LIS now." in request["messages"][1]["content"]
    assert out.sleeps == []


def test_a_timeout_is_environmental_and_retried_in_seconds() -> None:
    out = run([replace(memories(AIRPORT_FACT), delay=1.5), memories(AIRPORT_FACT)], timeout=0.5)
    assert out.failure is None
    assert len(out.requests) == 2
    assert len(out.sleeps) == 1
    assert 0.25 <= out.sleeps[0] <= 0.5


def test_429_honours_retry_after() -> None:
    out = run([error(429, "slow down", retry_after="7"), memories(AIRPORT_FACT)])
    assert out.failure is None
    assert out.sleeps == [7.0]


def test_a_429_without_retry_after_waits_the_default() -> None:
    out = run([error(429, "slow down"), memories(AIRPORT_FACT)])
    assert out.sleeps == [3.0]


def test_a_503_that_persists_is_retried_up_to_the_bound_then_fails_environmental() -> None:
    out = run([error(503, "overloaded")])
    assert out.result is None
    assert isinstance(out.failure, EnvironmentalError)
    assert out.failure.kind is FailureKind.SERVER
    assert out.failure.attempts == POLICY.max_attempts
    assert len(out.requests) == POLICY.max_attempts
    assert len(out.sleeps) == POLICY.max_attempts - 1


def test_401_is_environmental_for_a_later_run_and_not_retried_in_this_one() -> None:
    out = run([error(401, "key revoked"), memories(AIRPORT_FACT)])
    assert isinstance(out.failure, EnvironmentalError), "a rerun with a rotated key succeeds"
    assert out.failure.kind is FailureKind.CREDENTIALS
    assert len(out.requests) == 1, "no wait heals a revoked key: sent once"
    assert out.sleeps == []


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (
            error(
                400, "This model's maximum context length is 8192 tokens", "context_length_exceeded"
            ),
            FailureKind.CONTEXT_TOO_LONG,
        ),
        (error(400, "messages[1].content is invalid"), FailureKind.BAD_REQUEST),
        (completion(None, refusal="I can't help with that."), FailureKind.REFUSAL),
    ],
)
def test_content_failures_are_not_retried(answer, kind) -> None:
    out = run([answer])
    assert isinstance(out.failure, ContentError)
    assert out.failure.kind is kind
    assert out.failure.attempts == 1
    assert len(out.requests) == 1
    assert out.sleeps == []


def test_invalid_json_gets_one_repair_then_is_a_content_failure() -> None:
    out = run([completion("not json at all")])
    assert isinstance(out.failure, ContentError)
    assert out.failure.kind is FailureKind.INVALID_OUTPUT
    assert len(out.requests) == 2, "the answer and one repair, not retried further"
    assert "did not validate" in out.requests[1]["messages"][-1]["content"]


def test_a_repaired_answer_is_accepted() -> None:
    out = run([completion('{"memories": [{"txt": "x"}]}'), memories(AIRPORT_FACT)])
    assert out.failure is None
    assert out.result[0].label == "home_airport"
    assert len(out.requests) == 2


def test_a_server_without_json_schema_support_gets_json_mode() -> None:
    out = run([error(400, "response_format json_schema is not supported"), memories(AIRPORT_FACT)])
    assert out.failure is None
    assert [r["response_format"]["type"] for r in out.requests] == ["json_schema", "json_object"]
