"""Rate limits towards a provider: a Prefect global rate limit where one is named (shared by
every worker of every machine using the same Prefect server), else a process-wide limit
(evenly spaced calls shared by every thread)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from mempipe.domain.failures import EnvironmentalError, FailureKind
from mempipe.errors import ConfigError
from mempipe.schemas.replay import LLMSettings


class Limiter(Protocol):
    def acquire(self) -> None:
        """Wait until the next request may go."""
        ...


class RateLimiter:
    """Spaces calls evenly at ``per_minute``; each caller waits for its own slot."""

    def __init__(
        self,
        per_minute: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self._interval = 60.0 / per_minute
        self._clock = clock
        self._sleep = sleep
        self._next = clock()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self._interval
        if start > now:
            self._sleep(start - now)


_limiters: dict[str, RateLimiter] = {}
_lock = threading.Lock()


def limiter_for(endpoint: str, per_minute: float) -> RateLimiter:
    with _lock:
        return _limiters.setdefault(f"{endpoint}@{per_minute}", RateLimiter(per_minute))


class PrefectRateLimit:
    """One slot of a Prefect global concurrency limit with slot decay per request; a slot that
    does not come within ``timeout_s`` is a rate-limit failure (retried under the policy), not
    a wait without end."""

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s

    def acquire(self) -> None:
        from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError
        from prefect.concurrency.sync import rate_limit

        try:
            rate_limit(self.name, occupy=1, timeout_seconds=self.timeout_s, strict=True)
        except TimeoutError as exc:
            raise EnvironmentalError(
                FailureKind.RATE_LIMIT,
                f"no slot of Prefect rate limit {self.name!r} within {self.timeout_s:g} s",
            ) from exc
        except ConcurrencySlotAcquisitionError as exc:
            raise ConfigError(
                f"Prefect rate limit {self.name!r} is not on the server: create it with "
                f"`prefect gcl create {self.name} --limit N --slot-decay-per-second R`"
            ) from exc


def limiter(settings: LLMSettings, endpoint: str) -> Limiter | None:
    """The limit requests to ``endpoint`` observe: ``settings.rate_limit`` names a Prefect
    one; else ``requests_per_minute`` in this process; else none."""
    if settings.rate_limit:
        return PrefectRateLimit(settings.rate_limit, settings.timeout_seconds)
    if settings.requests_per_minute:
        return limiter_for(endpoint, settings.requests_per_minute)
    return None
