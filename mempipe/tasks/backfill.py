"""Tasks of the backfill flow: ingest the archives in groups (found by tasks/archives)."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.schemas.archive import IngestRequest, Reading
from mempipe.schemas.summaries import IngestTotals
from mempipe.services.backfill.ingest import ingest_files
from mempipe.services.backfill.summary import tally_files
from mempipe.tasks.policies import step

LOGGED_FILES = 20
"""A group of more files logs one line for the group, and one for each file with rejects or
that could not be read to the end."""


@step("ingest-archives", retry_after=(2, 10))
def ingest_archives(store_url: str, paths: list[str], reading: Reading) -> IngestTotals:
    """Idempotent: a retried or repeated ingest of the same files inserts nothing new."""
    with unit_of_work(store_url) as uow:
        requests = [IngestRequest(path=Path(path), **dict(reading)) for path in paths]
        summaries = ingest_files(uow, requests)
        logger = get_run_logger()
        totals = tally_files(summaries)
        if len(summaries) > LOGGED_FILES:
            counts = totals.counts
            logger.info(
                "%d files: %d turns read, %d inserted, %d duplicates skipped, %d rejected",
                totals.files_read,
                counts.turns_read,
                counts.turns_inserted,
                counts.duplicates_skipped,
                counts.rejected,
            )
        for summary in summaries:
            if len(summaries) <= LOGGED_FILES or summary.rejected or summary.failed:
                logger.info(
                    "%s (%s): %d turns read, %d inserted, %d duplicates skipped, %d rejected",
                    summary.path,
                    summary.format,
                    summary.turns_read,
                    summary.turns_inserted,
                    summary.duplicates_skipped,
                    summary.rejected,
                )
        return totals
