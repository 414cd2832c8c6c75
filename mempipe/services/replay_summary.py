"""Add up a replay's extraction summaries."""

from __future__ import annotations

from mempipe.schemas.replay import ReplaySettings, ReplaySummary
from mempipe.schemas.snapshot import ExtractionStatus
from mempipe.services.replay import ExtractionSummary


def summarize_replay(
    run_id: str,
    store_url: str,
    settings: ReplaySettings,
    results: list[ExtractionSummary],
    audit_dir: str,
    files: list[str],
) -> ReplaySummary:
    skipped = sum(r.claimed_elsewhere for r in results)
    results = [r for r in results if not r.claimed_elsewhere]
    return ReplaySummary(
        run_id=run_id,
        store=store_url,
        extractor=settings.extractor.value,
        embedding_model=settings.embedding_model,
        snapshots=len({r.snapshot_id for r in results}),
        extractions=len(results),
        done=sum(r.status is ExtractionStatus.DONE for r in results),
        failed_retryable=sum(r.status is ExtractionStatus.FAILED_RETRYABLE for r in results),
        failed_content=sum(r.status is ExtractionStatus.FAILED_CONTENT for r in results),
        memories_extracted=sum(r.extracted for r in results),
        added=sum(r.added for r in results),
        updated=sum(r.updated for r in results),
        reinforced=sum(r.reinforced for r in results),
        unembedded=sum(r.unembedded for r in results),
        claimed_elsewhere=skipped,
        audit_dir=audit_dir,
        audit_files=files,
    )
