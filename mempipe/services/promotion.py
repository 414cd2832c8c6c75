"""Promote every unpromoted turn in the store into snapshots, streaming, in write batches.

Cutting (Python) and writing (the store) overlap as in the ingest: one writer thread stores
batch *k* while batch *k+1* is cut and encoded. At most two batches are in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice

from mempipe.adapters.store.base import Turns
from mempipe.bulk import bulk_work
from mempipe.domain.promotion import TurnStamp, cut_snapshots
from mempipe.progress import track
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.snapshot import Snapshot
from mempipe.schemas.summaries import PromotionSummary


def promote_sessions(
    store: Turns,
    limits: PromotionLimits,
    handlers: Iterable[str],
    *,
    run_id: str | None,
    write_batch: int = 1000,
) -> PromotionSummary:
    total = store.count_unpromoted_turns()
    summary = PromotionSummary()
    reasons: Counter[str] = Counter()
    last_session: tuple[str, str, str, str] | None = None

    def account(written: Future[set[str]], batch: list[Snapshot]) -> None:
        created = written.result()
        for snapshot in batch:
            if snapshot.snapshot_id in created:
                summary.snapshots_created += 1
                summary.turns_promoted += snapshot.turn_count
                reasons[snapshot.cut_reason.value] += 1

    with (
        bulk_work(),
        track("promote sessions", total, "turns") as progress,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="mempipe-promoter") as writer,
    ):
        in_flight: tuple[Future[set[str]], list[Snapshot]] | None = None
        seen = CountingIterator(store.iter_unpromoted_turns())
        snapshots = cut_snapshots(seen, limits, handlers=handlers, run_id=run_id)
        while batch := list(islice(snapshots, write_batch)):
            written = writer.submit(store.write_snapshots, store.encode_snapshots(batch))
            for snapshot in batch:
                key = (
                    snapshot.org_id,
                    snapshot.project_id,
                    snapshot.user_id or "",
                    snapshot.session_id,
                )
                if key != last_session:
                    summary.sessions += 1
                    last_session = key
            if in_flight is not None:
                account(*in_flight)
            in_flight = (written, batch)
            progress.update(seen.count)
        if in_flight is not None:
            account(*in_flight)
    summary.by_reason = dict(reasons)
    return summary


class CountingIterator(Iterator[TurnStamp]):
    """Passes turns through, counting them, so progress can be reported mid-stream."""

    def __init__(self, turns: Iterator[TurnStamp]) -> None:
        self._turns = turns
        self.count = 0

    def __next__(self) -> TurnStamp:
        turn = next(self._turns)
        self.count += 1
        return turn
