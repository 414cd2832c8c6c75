"""Tasks of the backfill flow: find the archives, ingest each file, promote sessions."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.archives import expand_paths
from mempipe.schemas.archive import IngestRequest, TimeWindow
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.summaries import IngestSummary, PromotionSummary
from mempipe.services import promotion
from mempipe.services.ingest import ingest_file
from mempipe.tasks.policies import retry_if_transient


@task(name="resolve-archives", cache_policy=NO_CACHE)
def resolve_archives(paths: list[str]) -> list[str]:
    files = [str(p) for p in expand_paths(paths)]
    get_run_logger().info("found %d archive file(s)", len(files))
    return files


@task(
    name="ingest-archive",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[2, 10],
    retry_condition_fn=retry_if_transient,
)
def ingest_archive(
    store_url: str,
    path: str,
    archive_format: str,
    defaults: IdentityDefaults,
    columns: dict[str, str],
    run_id: str,
    rejects_file: str,
    batch_size: int,
    times: TimeWindow | None = None,
) -> IngestSummary:
    """Idempotent: a retried or repeated ingest of the same file inserts nothing new."""
    request = IngestRequest(
        path=Path(path),
        format=archive_format,
        defaults=defaults,
        run_id=run_id,
        rejects_file=Path(rejects_file),
        batch_size=batch_size,
        columns=columns,
        times=times,
    )
    with unit_of_work(store_url) as uow:
        summary = ingest_file(uow, request)
    get_run_logger().info(
        "%s (%s): %d turns read, %d inserted, %d duplicates skipped, %d rejected",
        path,
        summary.format,
        summary.turns_read,
        summary.turns_inserted,
        summary.duplicates_skipped,
        summary.rejected,
    )
    return summary


@task(
    name="promote-sessions",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[2, 10],
    retry_condition_fn=retry_if_transient,
)
def promote_sessions(
    store_url: str, limits: PromotionLimits, handlers: list[str], run_id: str
) -> PromotionSummary:
    """Idempotent: snapshot ids are deterministic and promoted turns are never promoted again."""
    with unit_of_work(store_url) as uow:
        summary = promotion.promote_sessions(uow, limits, handlers, run_id=run_id)
    get_run_logger().info(
        "promoted %d turns of %d sessions into %d snapshots %s",
        summary.turns_promoted,
        summary.sessions,
        summary.snapshots_created,
        summary.by_reason,
    )
    return summary
