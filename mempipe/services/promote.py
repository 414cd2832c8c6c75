"""Promote every unpromoted turn in the store into snapshots, streaming, in write batches.

The store is handed the batches as they are cut (``add_snapshot_batches``), as in the ingest:
at most two batches are in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bulk import bulk_work
from mempipe.domain.promotion import TurnStamp, cut_snapshots
from mempipe.progress import track
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.snapshot import Snapshot
from mempipe.schemas.summaries import PromotionSummary


def promote_sessions(
    uow: UnitOfWork,
    limits: PromotionLimits,
    handlers: Iterable[str],
    *,
    run_id: str | None,
    write_batch: int = 1000,
) -> PromotionSummary:
    total = uow.turns.count_unpromoted_turns()
    summary = PromotionSummary()
    reasons: Counter[str] = Counter()
    last_session: tuple[str, str, str, str] | None = None

    def account(created: set[str], batch: Sequence[Snapshot]) -> None:
        for snapshot in batch:
            if snapshot.snapshot_id in created:
                summary.snapshots_created += 1
                summary.turns_promoted += snapshot.turn_count
                reasons[snapshot.cut_reason.value] += 1

    with bulk_work(), track("promote sessions", total, "turns") as progress:
        seen = CountingIterator(uow.turns.iter_unpromoted_turns())
        snapshots = cut_snapshots(seen, limits, handlers=handlers, run_id=run_id)

        def cut() -> Iterator[tuple[list[Snapshot], list[Snapshot]]]:
            nonlocal last_session
            while batch := list(islice(snapshots, write_batch)):
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
                yield batch, batch
                progress.update(seen.count)

        for created, batch in uow.turns.add_snapshot_batches(cut()):
            account(created, batch)
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
