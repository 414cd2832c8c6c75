"""Export: a store, or one org, project or user, as a portable bundle."""

from __future__ import annotations

from typing import ClassVar

from mempipe.bootstrap import AppContext, load_context, require_store
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.schemas.bundle import (
    BundleSelection,
    ExportSummary,
)
from mempipe.schemas.run import FileKind
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.export import write_bundle
from mempipe.tasks.runs import (
    record_written_file,
)


class Export(Job[ExportSummary]):
    """The request of ``mempipe export``: it reads a store that is there."""

    prepares_store: ClassVar[bool] = False

    out: str
    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    with_vectors: bool = False

    def check(self, context: AppContext) -> None:
        require_store(context.store_url)

    def run(self, context: AppContext) -> ExportSummary:
        return export_flow(**self.model_dump(), **context.flow_options())


@job_flow("export")
def export_flow(
    out: str,
    org_id: str | None = None,
    project_id: str | None = None,
    user_id: str | None = None,
    with_vectors: bool = False,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> ExportSummary:
    """The store is not changed but for one line saying where the bundle went (it holds users'
    text, so an erase must reach it); no run is recorded."""
    context = load_context(store, config, store_secret)
    selection = BundleSelection(org_id=org_id, project_id=project_id, user_id=user_id)
    record_written_file(context.store_url, out, FileKind.BUNDLE, None, user_id)
    summary = write_bundle(context.store_url, out, selection, with_vectors)
    publish_table(
        "export",
        [
            {"collection": c, "records": n, "digest": summary.digests[c]}
            for c, n in summary.counts.items()
        ],
        f"exported to {summary.out}",
    )
    return summary
