"""Copy: every record of a store into another, resumable and verified."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from mempipe.bootstrap import AppContext, load_context, require_store
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.flows.recorded_run import concluded, recorded_run
from mempipe.interrupts import handle_stop_signals
from mempipe.rejects import rejects_path
from mempipe.schemas.bundle import (
    CopySummary,
)
from mempipe.schemas.run import FileKind
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.copy import copy_records
from mempipe.tasks.runs import (
    record_written_file,
)


class Copy(Job[CopySummary]):
    """The request of ``mempipe copy``: the source (``--store``) must be there; the target
    (``--to``) is made if it is not, and given to the flow by its public URL (its password
    stays in this process)."""

    prepares_store: ClassVar[bool] = False

    to: str
    to_secret: str | None = None
    with_vectors: bool = False
    batch_size: Annotated[int, Field(ge=1, le=100_000)] = 2000
    rejects_dir: str = "mempipe-rejects"

    def check(self, context: AppContext) -> None:
        require_store(context.store_url)

    def run(self, context: AppContext) -> CopySummary:
        target = load_context(self.to, context.settings.config, self.to_secret)
        target.prepare_store(create=True)
        return copy_flow(
            **self.model_dump(exclude={"to", "to_secret"}),
            to=target.store_url,
            **context.flow_options(),
        )


@job_flow("copy")
def copy_flow(
    to: str,
    to_secret: str | None = None,
    with_vectors: bool = False,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
    batch_size: Annotated[int, Field(ge=1, le=100_000)] = 2000,
    rejects_dir: str = "mempipe-rejects",
) -> CopySummary:
    """Resumable: a copy into the same target that was killed goes on after its last committed
    batch. The run is recorded in the target; it fails when the verification does."""
    handle_stop_signals()
    source = load_context(store, config, store_secret)
    target = load_context(to, config, to_secret)
    parameters = {"from": source.store_url}
    with recorded_run(target, "copy", parameters, creates_store=True) as run:
        rejects = rejects_path(rejects_dir, run.run_id, "copy")
        for store_url in (source.store_url, target.store_url):
            record_written_file(store_url, str(rejects), FileKind.REJECTS, run.run_id)
        summary = copy_records(
            source.store_url, target.store_url, run.run_id, str(rejects), with_vectors, batch_size
        )
        failed = None if summary.verified else "; ".join(summary.differences)
        run.end(summary.copied, failed)
    publish_table(
        "copy",
        [{"collection": c, "copied": n} for c, n in summary.copied.items()],
        f"copy {run.run_id}: {'verified' if summary.verified else 'NOT verified'}",
    )
    return concluded(summary, "copy", failed and f"the copy differs from its source: {failed}")
