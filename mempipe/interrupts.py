"""Stopping on SIGTERM and SIGINT (DESIGN rule: any job stops within seconds, recorded
``interrupted`` with its true counts, leases released, and a rerun completes it).

The first signal asks the job to stop: every work loop checks :func:`stop_requested` between
units (an extraction batch, an embedding batch, an archive batch, a copy batch) and returns what
it did; waits between retries end at once (:func:`interruptible_sleep`). What is in flight is
finished or left untouched, never half-written: each unit commits in one transaction. The flow
then records the run as interrupted and raises :class:`~mempipe.errors.InterruptedRunError`,
and the command exits 128 + the signal's number (143 for SIGTERM, 130 for SIGINT). A second signal
stops the process at once, as the signal's default would.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from mempipe.errors import InterruptedRunError

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_stop = threading.Event()
_received: list[int] = []


class StopRequested(BaseException):
    """Unwinds a wait between retries once a stop is asked; never recorded as a failure."""


def stop_requested() -> bool:
    return _stop.is_set()


def stop_signal() -> int | None:
    """The signal that asked for the stop, if one did."""
    return _received[0] if _received else None


def request_stop(signum: int) -> None:
    if not _received:
        _received.append(signum)
    _stop.set()


def interruptible_sleep(seconds: float) -> None:
    """``time.sleep`` for retry waits, ended by a stop request."""
    if _stop.wait(seconds):
        raise StopRequested


def _handle(signum: int, frame: FrameType | None) -> None:
    if _stop.is_set():
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    request_stop(signum)
    print(
        f"mempipe: {signal.Signals(signum).name}: stopping after the work in flight "
        "(send it again to stop at once)",
        file=sys.stderr,
        flush=True,
    )


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGINT ask for a stop while inside; the handlers before are restored after
    (a command's whole run; see also :func:`handle_stop_signals`). Outside the main thread it
    does nothing: signals reach only the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _handle) for s in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def handle_stop_signals() -> None:
    """From now on SIGTERM and SIGINT ask for a stop: the first line of each job's flow
    (Prefect's engine installs a SIGTERM handler of its own for a flow's duration, and puts
    back the one before it when the flow ends). Outside the main thread it does nothing."""
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, _handle)


def raise_if_stopped(summary: object, job: str) -> None:
    """After the run recorded itself: a run a signal stopped fails as interrupted, with what
    it did, so that the command says so and exits 128 + the signal's number."""
    if not stop_requested():
        return
    signum = stop_signal() or signal.SIGTERM
    raise InterruptedRunError(
        f"{job} stopped by {signal.Signals(signum).name} after the work in flight; "
        "the same command again goes on from there",
        summary,
        signum,
    )
