"""Rebuild indexes: report drift between declared and actual index definitions, create what is
absent, and rebuild a drifted index only when asked (``force``)."""

from __future__ import annotations

from mempipe.bootstrap import AppContext, load_context
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.schemas.indexes import IndexReport, IndexState
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.indexes import repair_indexes
from mempipe.tasks.runs import prepare_store


class RebuildIndexes(Job[IndexReport]):
    """The request of ``mempipe rebuild-indexes``."""

    force: bool = False

    def run(self, context: AppContext) -> IndexReport:
        return rebuild_indexes_flow(force=self.force, **context.flow_options())


@job_flow("rebuild-indexes")
def rebuild_indexes_flow(
    force: bool = False,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> IndexReport:
    context = load_context(store, config, store_secret)
    prepare_store(context.store_url, context.declarations)
    statuses = repair_indexes(context.store_url, force)
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
