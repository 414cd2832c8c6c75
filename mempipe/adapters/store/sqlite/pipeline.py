"""The SQLite store's bulk pipeline: a batch is encoded (one JSON array of rows per statement)
in the thread that made it, and written by one writer thread while the next batch is made.

SQLite holds no Python lock while it runs a statement, so writing batch *k* truly runs beside
the parsing or cutting of batch *k+1* (BENCHMARKS.md "Backfill"). At most two batches are in
memory. Callers see only the port's ``add_*_batches``: the pipeline is this backend's affair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

R = TypeVar("R")
C = TypeVar("C")
P = TypeVar("P")
W = TypeVar("W")


def overlapped(
    batches: Iterable[tuple[Sequence[R], C]],
    encode: Callable[[Sequence[R]], P],
    write: Callable[[P], W],
) -> Iterator[tuple[W, C]]:
    """Each batch's write result with what came beside the batch, in order; a write's error is
    raised when its result is reached."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mempipe-writer") as writer:
        in_flight: tuple[Future[W], C] | None = None
        for records, context in batches:
            written = writer.submit(write, encode(records))
            if in_flight is not None:
                yield in_flight[0].result(), in_flight[1]
            in_flight = (written, context)
        if in_flight is not None:
            yield in_flight[0].result(), in_flight[1]


def shared(
    batches: Iterable[tuple[Sequence[R], C]], up_to: int
) -> Iterator[tuple[list[Sequence[R]], list[C]]]:
    """Consecutive batches gathered while they hold at most ``up_to`` records in all (a batch
    of more is a group of its own), each group as its batches and what came beside each."""
    group: list[Sequence[R]] = []
    contexts: list[C] = []
    held = 0
    for records, context in batches:
        if group and (up_to <= 0 or held + len(records) > up_to):
            yield group, contexts
            group, contexts, held = [], [], 0
        group.append(records)
        contexts.append(context)
        held += len(records)
    if group:
        yield group, contexts
