"""The rate limit towards an LLM endpoint spaces calls evenly."""

from __future__ import annotations

from mempipe.adapters.llm.ratelimit import RateLimiter


def test_calls_are_spaced_at_the_configured_rate() -> None:
    now = [100.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)

    limiter = RateLimiter(per_minute=120, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        limiter.acquire()
    assert waits == [0.5, 1.0], "the second call waits one slot, the third two"
    now[0] = 200.0
    limiter.acquire()
    assert waits == [0.5, 1.0], "after a quiet spell nobody waits"
