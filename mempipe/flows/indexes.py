"""Rebuild indexes: report drift between declared and actual index definitions, create what is
absent, and rebuild a drifted index only when asked (``force``)."""

from __future__ import annotations

from prefect import flow

from mempipe.bootstrap import load_context
from mempipe.schemas.indexes import IndexReport, IndexState
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.indexes import rebuild_indexes_task


@flow(name="rebuild-indexes")
def rebuild_indexes(
    force: bool = False, store: str | None = None, config: str | None = None
) -> IndexReport:
    context = load_context(store, config)
    statuses = rebuild_indexes_task(context.store_url, config, force)
    report = IndexReport(
        store=context.store_url,
        indexes=statuses,
        drift=sum(s.state is IndexState.DRIFT for s in statuses),
        rebuilt=sum(s.state is IndexState.REBUILT for s in statuses),
        created=sum(s.state is IndexState.CREATED for s in statuses),
    )
    publish_table(
        "indexes",
        [s.model_dump() | {"differences": "; ".join(s.differences)} for s in statuses],
        f"{report.drift} drifted, {report.rebuilt} rebuilt, {report.created} created",
    )
    return report
