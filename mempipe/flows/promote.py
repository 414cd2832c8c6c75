"""Promote: cut every session's unpromoted turns into snapshots (backfill does this at its end;
run it alone after changing the promotion limits, or after a backfill with promotion off)."""

from __future__ import annotations

from mempipe.bootstrap import AppContext, load_context
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.flows.recorded_run import recorded_run
from mempipe.schemas.summaries import PromotionSummary
from mempipe.tasks.promote import promote_sessions


class Promote(Job[PromotionSummary]):
    """The request of ``mempipe promote``: nothing but the store."""

    def run(self, context: AppContext) -> PromotionSummary:
        return promote_flow(**context.flow_options())


@job_flow("promote")
def promote_flow(
    store: str | None = None, config: str | None = None, store_secret: str | None = None
) -> PromotionSummary:
    context = load_context(store, config, store_secret)
    memory = context.config.memory
    with recorded_run(context, "promote", {}) as run:
        handlers = [t.value for t in memory.extraction.enabled]
        summary = promote_sessions(context.store_url, memory.promotion, handlers, run.run_id)
        run.end(summary.model_dump(exclude={"by_reason"}))
    return summary
