"""Add up a replay's extraction summaries."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.replay import ReplaySettings, ReplaySummary
from mempipe.schemas.snapshot import ExtractionStatus
from mempipe.services.replay.extract import ExtractionSummary


def _most_said(errors: list[str]) -> str | None:
    """The error most of them say (the first of those, where several tie)."""
    return Counter(errors).most_common(1)[0][0] if errors else None


class BucketOutcome(BaseModel):
    """What one partition of a replay did, and how much of its work another replay did while
    this one waited for the owners it held."""

    model_config = ConfigDict(extra="forbid")

    results: list[ExtractionSummary]
    selected: int = Field(default=0, description="the extractions the partition was given")
    done_elsewhere: int = 0
    erased_meanwhile: int = 0
    summarized: int = Field(default=0, description="sessions the extractor summarized")


def summarize_replay(
    run_id: str,
    store_url: str,
    settings: ReplaySettings,
    outcomes: list[BucketOutcome],
    audit_dir: str,
    files: list[str],
) -> ReplaySummary:
    erased = [r for outcome in outcomes for r in outcome.results if r.erased]
    results = [r for outcome in outcomes for r in outcome.results if not r.erased]
    return ReplaySummary(
        run_id=run_id,
        store=store_url,
        extractor=settings.extractor,
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
        done_elsewhere=sum(outcome.done_elsewhere for outcome in outcomes),
        erased_meanwhile=len(erased) + sum(o.erased_meanwhile for o in outcomes),
        summaries=sum(o.summarized for o in outcomes),
        failure=_most_said([r.error for r in results if r.error]),
        pending=max(
            0,
            sum(
                o.selected - len(o.results) - o.done_elsewhere - o.erased_meanwhile
                for o in outcomes
            ),
        ),
        audit_dir=audit_dir,
        audit_files=files,
    )
