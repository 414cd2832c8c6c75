"""Promote: cut every session's unpromoted turns into snapshots (backfill does this at its end;
run it alone after changing the promotion limits, or after a backfill with promotion off)."""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run

from mempipe.bootstrap import load_context
from mempipe.flows.hooks import record_failed_run
from mempipe.schemas.summaries import PromotionSummary
from mempipe.tasks.backfill import promote_sessions
from mempipe.tasks.runs import prepare_store, record_run_end, record_run_start


@flow(name="promote", on_failure=[record_failed_run], on_crashed=[record_failed_run])
def promote_flow(
    store: str | None = None, config: str | None = None, store_secret: str | None = None
) -> PromotionSummary:
    context = load_context(store, config, store_secret)
    run_id = str(flow_run.id)
    prepare_store(context.store_url, config)
    record_run_start(context.store_url, run_id, "promote", {})
    summary = promote_sessions(
        context.store_url,
        context.config.memory.promotion,
        [t.value for t in context.config.memory.extraction.enabled],
        run_id,
    )
    record_run_end(context.store_url, run_id, summary.model_dump(exclude={"by_reason"}))
    return summary
