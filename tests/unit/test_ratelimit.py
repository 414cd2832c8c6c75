"""A budget lets at most its figure through in any 60 seconds: a tenth at once, the rest as it
refills; a request larger than the burst takes its tokens in turns."""

from __future__ import annotations

from mempipe.adapters.llm.ratelimit import TokenBucket, budget_names, per_minute_bucket


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.taken: list[tuple[float, float]] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_no_sixty_seconds_see_more_than_the_budget() -> None:
    clock = Clock()
    bucket = per_minute_bucket(6000, clock=clock, sleep=clock.sleep)
    sent: list[tuple[float, int]] = []
    for size in [500, 700, 300, 900, 450] * 40:
        bucket.take(size)
        sent.append((clock.now, size))
    for start, _ in sent:
        window = sum(size for at, size in sent if start <= at < start + 60)
        assert window <= 6000, f"{window} tokens in the 60 s from {start:.1f}"
    total_time = sent[-1][0]
    assert sum(size for _, size in sent) / total_time * 60 > 5000, "and it is used, not idle"


def test_a_taker_waits_for_its_share_and_a_quiet_spell_refills_only_to_the_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(capacity=10, per_second=1, clock=clock, sleep=clock.sleep)
    bucket.take(10)
    assert clock.now == 0, "the burst goes at once"
    bucket.take(5)
    assert clock.now == 5, "then each token waits for its refill"
    clock.now += 1000
    bucket.take(25)
    assert clock.now == 1005 + 15, "a quiet spell refills only to the capacity; larger in turns"


def test_budget_names_are_per_endpoint_and_model() -> None:
    a = budget_names("https://api.openai.com/v1/", "text-embedding-3-small")
    b = budget_names("http://localhost:8000/v1/", "text-embedding-3-small")
    assert a != b
    assert a[0].endswith("-requests")
    assert a[1].endswith("-tokens")
    assert a[0].startswith("mempipe-text-embedding-3-small-")
