"""A process-wide rate limit towards one endpoint (a token bucket shared by every thread)."""

from __future__ import annotations

import threading
import time


class RateLimiter:
    def __init__(self, per_minute: float) -> None:
        self._interval = 60.0 / per_minute
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self._interval
        if start > now:
            time.sleep(start - now)


_limiters: dict[str, RateLimiter] = {}
_lock = threading.Lock()


def limiter_for(endpoint: str, per_minute: float) -> RateLimiter:
    with _lock:
        return _limiters.setdefault(f"{endpoint}@{per_minute}", RateLimiter(per_minute))
