"""Tasks of the import flows."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.bootstrap import spend_recorded
from mempipe.schemas.bundle import BundleImportSummary, Manifest
from mempipe.schemas.memory_import import MemoryImportRequest, MemoryImportSummary, MemoryReading
from mempipe.schemas.replay import ReplaySettings
from mempipe.services import memory_import
from mempipe.services.bundle_import import checked_bundle, import_bundle
from mempipe.tasks.extraction import extraction_context
from mempipe.tasks.policies import step


@step("check-bundle")
def check_bundle(path: str) -> Manifest:
    """The whole bundle held against its manifest before anything of the store is touched."""
    return checked_bundle(Path(path))


@step("read-bundle")
def read_bundle(
    store_url: str, path: str, checked: Manifest, run_id: str, rejects_file: str
) -> BundleImportSummary:
    with unit_of_work(store_url) as uow:
        summary = import_bundle(
            uow, Path(path), run_id=run_id, rejects_file=Path(rejects_file), checked=checked
        )
        logger = get_run_logger()
        logger.info("imported %s, skipped %s", summary.written, summary.duplicates_skipped)
        for difference in summary.digest_differences:
            logger.warning("digest differs: %s", difference)
        return summary


@step("import-memory-file")
def import_memory_file(
    store_url: str, path: str, reading: MemoryReading, settings: ReplaySettings, run_id: str
) -> MemoryImportSummary:
    with unit_of_work(store_url) as uow, spend_recorded(uow):
        context = extraction_context(settings, run_id, uow)
        request = MemoryImportRequest(path=Path(path), **dict(reading))
        summary = memory_import.import_memory_file(uow, request, context)
        get_run_logger().info(
            "%s: %d added, %d updated, %d reinforced, %d already held, %d rejected",
            path,
            summary.added,
            summary.updated,
            summary.reinforced,
            summary.duplicates_skipped,
            summary.rejected,
        )
        return summary
