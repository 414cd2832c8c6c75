"""Tasks of the backfill flow: find the archives, ingest them in groups, promote sessions."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.archives import expand_paths
from mempipe.bootstrap import given_store
from mempipe.domain.partitioning import file_groups
from mempipe.schemas.archive import IngestRequest, Reading
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.summaries import IngestSummary, PromotionSummary
from mempipe.services import promotion
from mempipe.services.ingest import ingest_files
from mempipe.tasks.policies import retry_if_transient

GROUP_FILES = 2000
GROUP_BYTES = 64 * 1024 * 1024
"""An ingest task reads at most this many files, or about this many bytes: a directory of many
small files is a few tasks (each a Prefect task run and its state round trips), not one a file."""
LOGGED_FILES = 20
"""A group of more files logs one line for the group, and one for each file with rejects or
that could not be read to the end."""


@task(name="resolve-archives", cache_policy=NO_CACHE)
def resolve_archives(paths: list[str]) -> list[list[str]]:
    """The archive files the paths name, in groups: one ingest task each."""
    files = [(str(p), p.stat().st_size) for p in expand_paths(paths)]
    groups = file_groups(files, GROUP_FILES, GROUP_BYTES)
    get_run_logger().info("found %d archive file(s), read in %d task(s)", len(files), len(groups))
    return groups


@task(
    name="ingest-archives",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[2, 10],
    retry_condition_fn=retry_if_transient,
)
@given_store()
def ingest_archives(uow: UnitOfWork, paths: list[str], reading: Reading) -> list[IngestSummary]:
    """Idempotent: a retried or repeated ingest of the same files inserts nothing new."""
    requests = [IngestRequest(path=Path(path), **dict(reading)) for path in paths]
    summaries = ingest_files(uow, requests)
    logger = get_run_logger()
    if len(summaries) > LOGGED_FILES:
        logger.info(
            "%d files: %d turns read, %d inserted, %d duplicates skipped, %d rejected",
            len(summaries),
            sum(s.turns_read for s in summaries),
            sum(s.turns_inserted for s in summaries),
            sum(s.duplicates_skipped for s in summaries),
            sum(s.rejected for s in summaries),
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
    return summaries


@task(
    name="promote-sessions",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[2, 10],
    retry_condition_fn=retry_if_transient,
)
@given_store()
def promote_sessions(
    uow: UnitOfWork, limits: PromotionLimits, handlers: list[str], run_id: str
) -> PromotionSummary:
    """Idempotent: snapshot ids are deterministic and promoted turns are never promoted again."""
    summary = promotion.promote_sessions(uow, limits, handlers, run_id=run_id)
    get_run_logger().info(
        "promoted %d turns of %d sessions into %d snapshots %s",
        summary.turns_promoted,
        summary.sessions,
        summary.snapshots_created,
        summary.by_reason,
    )
    return summary
