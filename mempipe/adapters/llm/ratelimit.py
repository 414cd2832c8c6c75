"""A process-wide rate limit towards one endpoint (a token bucket shared by every thread)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


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
