"""Tasks of the replay flow."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.embedding import embedder_for
from mempipe.adapters.llm.factory import extractor_for
from mempipe.adapters.store import open_store
from mempipe.adapters.store.base import WorkItem
from mempipe.progress import track
from mempipe.schemas.replay import ReplaySettings
from mempipe.schemas.selection import SnapshotSelection
from mempipe.services.audit import write_audit
from mempipe.services.replay import ExtractionSummary, ReplayContext, replay_one
from mempipe.tasks.policies import retry_if_transient


@task(name="select-extraction-work", cache_policy=NO_CACHE)
def select_work(
    store_url: str, selection: SnapshotSelection, handlers: list[str], force: bool
) -> list[list[WorkItem]]:
    """The work, in partitions: one owner's snapshots in time order."""
    store = open_store(store_url, migrate=False)
    try:
        items = store.extraction_work(selection, handlers, force=force)
    finally:
        store.close()
    partitions: dict[tuple[str, str, str], list[WorkItem]] = {}
    for item in items:
        partitions.setdefault(item.partition, []).append(item)
    get_run_logger().info("%d extractions in %d partitions", len(items), len(partitions))
    return list(partitions.values())


@task(
    name="replay-partition",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=retry_if_transient,
)
def replay_partition(
    store_url: str, items: list[WorkItem], settings: ReplaySettings, run_id: str
) -> list[ExtractionSummary]:
    """Idempotent: an extraction already done is not selected again, and one interrupted
    before its commit left nothing behind."""
    context = ReplayContext(
        run_id=run_id,
        extractor=extractor_for(settings.extractor, settings.llm),
        embedder=embedder_for(settings.embedding_model),
        thresholds=settings.thresholds,
        retry=settings.retry,
    )
    store = open_store(store_url, migrate=False)
    results: list[ExtractionSummary] = []
    try:
        with track(
            f"replay {items[0].user_id or items[0].org_id}", len(items), "extractions"
        ) as bar:
            for item in items:
                results.append(replay_one(store, item, context))
                bar.update(len(results))
    finally:
        store.close()
    failed = [r for r in results if r.failure_class is not None]
    logger = get_run_logger()
    logger.info("%d extractions done, %d failed", len(results) - len(failed), len(failed))
    for failure in failed:
        logger.warning(
            "%s/%s failed (%s): %s",
            failure.snapshot_id,
            failure.handler,
            failure.failure_class,
            failure.error,
        )
    return results


@task(name="export-audit", cache_policy=NO_CACHE)
def export_audit(
    store_url: str,
    out_dir: str,
    run_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> list[str]:
    store = open_store(store_url, migrate=False)
    try:
        files = write_audit(store.audit_rows(run_id, since, until), Path(out_dir))
    finally:
        store.close()
    return [str(f) for f in files]
