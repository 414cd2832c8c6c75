"""Tasks of the export flow."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.schemas.bundle import (
    BundleSelection,
    ExportSummary,
)
from mempipe.services.export import export_bundle
from mempipe.tasks.policies import step


@step("write-bundle")
def write_bundle(
    store_url: str, out: str, selection: BundleSelection, with_vectors: bool
) -> ExportSummary:
    with unit_of_work(store_url) as uow:
        summary = export_bundle(uow, Path(out), selection, with_vectors=with_vectors)
        get_run_logger().info("exported %s to %s", summary.counts, summary.out)
        return summary
