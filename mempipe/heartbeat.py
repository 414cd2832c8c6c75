"""A run's sign of life: while a flow works, a thread renews the run's heartbeat and the leases
it holds, so that other runs can tell it from a dead one (see :mod:`mempipe.domain.liveness`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.domain.liveness import HEARTBEAT, LEASE
from mempipe.errors import MempipeError

log = logging.getLogger(__name__)


@contextmanager
def keep_alive(store_url: str, run_id: str) -> Iterator[None]:
    """Renew ``run_id``'s heartbeat every ``HEARTBEAT`` until the block ends. A missed beat (a
    busy store) is logged and tried again at the next; the leases last ``LEASE``, several beats."""
    stop = threading.Event()
    thread = threading.Thread(
        target=_beat, args=(store_url, run_id, stop), name=f"mempipe-heartbeat-{run_id[:8]}"
    )
    thread.daemon = True
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def _beat(store_url: str, run_id: str, stop: threading.Event) -> None:
    """The heartbeat thread's own connection (a connection belongs to one thread)."""
    with unit_of_work(store_url) as uow:
        while not stop.wait(HEARTBEAT.total_seconds()):
            try:
                uow.leases.heartbeat(run_id, LEASE)
            except MempipeError as exc:
                log.warning("heartbeat of run %s failed: %s", run_id, exc)
