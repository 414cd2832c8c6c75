"""A provider's breaker (issue 38): after N consecutive failures that say it is down, or at once
on rejected credentials, a run stops sending to it; a throttle, a refusal or a bad request do
not trip it, and a success closes the count."""

from __future__ import annotations

import pytest

from mempipe.domain.failures import (
    CircuitBreaker,
    EnvironmentalError,
    FailureKind,
    RetryPolicy,
    failure_error,
)


def down(kind: FailureKind = FailureKind.TIMEOUT) -> Exception:
    return failure_error(kind, f"{kind} happened")


def test_the_breaker_opens_after_n_consecutive_failures_and_then_refuses_at_once() -> None:
    breaker = CircuitBreaker("fake at http://x", threshold=3)
    for _ in range(2):
        breaker.failed(down())
        breaker.check()
    breaker.failed(down(FailureKind.SERVER))
    with pytest.raises(EnvironmentalError) as raised:
        breaker.check()
    assert raised.value.kind is FailureKind.PROVIDER_DOWN
    assert "3 failures in a row" in str(raised.value)
    assert "server happened" in str(raised.value)


def test_a_success_or_an_answer_closes_the_count() -> None:
    breaker = CircuitBreaker("p", threshold=2)
    for between in (breaker.succeeded, lambda: breaker.failed(down(FailureKind.REFUSAL))):
        breaker.failed(down())
        between()
        breaker.failed(down())
        breaker.check()
        breaker.succeeded()


def test_rate_limits_do_not_trip_it() -> None:
    breaker = CircuitBreaker("p", threshold=1)
    breaker.failed(down(FailureKind.RATE_LIMIT))
    breaker.check()
    assert not breaker.open


def test_rejected_credentials_open_it_at_once() -> None:
    breaker = CircuitBreaker("p", threshold=100)
    breaker.failed(down(FailureKind.CREDENTIALS))
    with pytest.raises(EnvironmentalError, match="rejected the credentials"):
        breaker.check()


def test_credentials_and_an_open_breaker_are_retryable_later_but_not_retried_now() -> None:
    for kind in (FailureKind.CREDENTIALS, FailureKind.PROVIDER_DOWN):
        calls: list[int] = []

        def call(kind: FailureKind = kind, calls: list[int] = calls) -> None:
            calls.append(1)
            raise down(kind)

        with pytest.raises(EnvironmentalError) as raised:
            RetryPolicy(max_attempts=5).run(call, sleep=lambda _: None)
        assert raised.value.retryable, "a later run retries the work"
        assert len(calls) == 1
