"""The promote job's task: cut sessions into snapshots (a backfill ends with it)."""

from __future__ import annotations

from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.summaries import PromotionSummary
from mempipe.services import promote
from mempipe.tasks.policies import step


@step("promote-sessions", retry_after=(2, 10))
def promote_sessions(
    store_url: str, limits: PromotionLimits, handlers: list[str], run_id: str
) -> PromotionSummary:
    """Idempotent: snapshot ids are deterministic and promoted turns are never promoted again."""
    with unit_of_work(store_url) as uow:
        summary = promote.promote_sessions(uow, limits, handlers, run_id=run_id)
        get_run_logger().info(
            "promoted %d turns of %d sessions into %d snapshots %s",
            summary.turns_promoted,
            summary.sessions,
            summary.snapshots_created,
            summary.by_reason,
        )
        return summary
