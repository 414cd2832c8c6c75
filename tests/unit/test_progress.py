"""Progress is a side channel: a slow or unanswering progress API never stalls the work."""

from __future__ import annotations

import threading
import time

from mempipe import progress
from mempipe.progress import InBackground, Tracker


class RecordingSink:
    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.values: list[float] = []
        self.closed = False

    def update(self, completed: float) -> None:
        self.gate.wait()
        self.values.append(completed)

    def close(self) -> None:
        self.closed = True


def test_an_unanswering_sink_never_holds_up_the_work(monkeypatch) -> None:
    monkeypatch.setattr(progress, "CLOSE_WAIT_SECONDS", 0.2)
    never = threading.Event()
    sink = RecordingSink(never)
    background = InBackground(lambda: sink)
    tracker = Tracker([background])
    started = time.monotonic()
    for done in range(1, 10_001):
        tracker.update(done, force=True)
    background.close()
    assert time.monotonic() - started < 5
    assert sink.values == []
    never.set()


def test_the_last_value_arrives_and_the_sink_is_closed(monkeypatch) -> None:
    monkeypatch.setattr(progress, "ARTIFACT_EVERY_SECONDS", 0.0)
    gate = threading.Event()
    sink = RecordingSink(gate)
    background = InBackground(lambda: sink)
    for done in range(1, 1001):
        background.update(done)
    gate.set()
    background.close()
    assert sink.values[-1] == 1000
    assert len(sink.values) < 1000
    assert sink.values == sorted(sink.values)
    assert sink.closed
