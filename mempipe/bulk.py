"""Interpreter settings for bulk work: the garbage collector and the thread switch interval.

A bulk load allocates millions of short-lived objects and no reference cycles. With CPython's
default thresholds the cyclic collector runs every 700 allocations and, every so often, rescans
every long-lived object in the process (Prefect's and pydantic's included): measured on the
backfill benchmark, that cost more than parsing. Inside :func:`bulk_work` the objects that exist
are frozen (never rescanned) and collections run a hundred times less often.

A bulk load also parses in one thread while a writer thread waits in SQLite without Python's
lock; each time the writer needs the lock back (once per statement) it waits until the parsing
thread is made to let go, by default after 5 ms. Inside :func:`bulk_work` that interval is
0.5 ms: measured on the backfill benchmark, the writer otherwise spends more time waiting for the
lock than writing. Both settings are restored when the last concurrent user leaves.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

BULK_GEN0_THRESHOLD = 70_000
BULK_SWITCH_INTERVAL = 0.0005

_lock = threading.Lock()
_users = 0
_saved: tuple[tuple[int, int, int], float] | None = None


@contextmanager
def bulk_work() -> Iterator[None]:
    global _users, _saved
    with _lock:
        if _users == 0:
            thresholds = gc.get_threshold()
            _saved = (thresholds, sys.getswitchinterval())
            gc.freeze()
            gc.set_threshold(BULK_GEN0_THRESHOLD, thresholds[1], thresholds[2])
            sys.setswitchinterval(min(_saved[1], BULK_SWITCH_INTERVAL))
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                thresholds, interval = _saved
                gc.set_threshold(*thresholds)
                sys.setswitchinterval(interval)
                gc.unfreeze()
