"""Garbage-collector settings for bulk work.

A bulk load allocates millions of short-lived objects and no reference cycles. With CPython's
default thresholds the cyclic collector runs every 700 allocations and, every so often, rescans
every long-lived object in the process (Prefect's and pydantic's included): measured on the
backfill benchmark, that cost more than parsing. Inside :func:`relaxed_gc` the objects that
exist are frozen (never rescanned) and collections run a hundred times less often; both are
restored when the last concurrent user leaves.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

BULK_GEN0_THRESHOLD = 70_000

_lock = threading.Lock()
_users = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def relaxed_gc() -> Iterator[None]:
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(BULK_GEN0_THRESHOLD, _saved[1], _saved[2])
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                gc.unfreeze()
