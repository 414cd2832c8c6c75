"""Promote every unpromoted turn in the store into snapshots, streaming, in write batches."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from mempipe.adapters.store.base import Turns
from mempipe.domain.promotion import TurnStamp, cut_snapshots
from mempipe.gc_tuning import relaxed_gc
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
    pending: list[Snapshot] = []
    last_session: tuple[str, str, str, str] | None = None

    def flush() -> None:
        created = store.add_snapshots(pending)
        for snapshot in pending:
            if snapshot.snapshot_id in created:
                summary.snapshots_created += 1
                summary.turns_promoted += snapshot.turn_count
                reasons[snapshot.cut_reason.value] += 1
        pending.clear()

    with relaxed_gc(), track("promote sessions", total, "turns") as progress:
        seen = CountingIterator(store.iter_unpromoted_turns())
        for snapshot in cut_snapshots(seen, limits, handlers=handlers, run_id=run_id):
            key = (
                snapshot.org_id,
                snapshot.project_id,
                snapshot.user_id or "",
                snapshot.session_id,
            )
            if key != last_session:
                summary.sessions += 1
                last_session = key
            pending.append(snapshot)
            if len(pending) >= write_batch:
                flush()
                progress.update(seen.count)
        flush()
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
