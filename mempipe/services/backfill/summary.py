"""Add up what the backfill's tasks did into the flow's summary."""

from __future__ import annotations

from pathlib import Path

from mempipe.schemas.summaries import BackfillSummary, IngestSummary, PromotionSummary, UserCount


def summarize_backfill(
    run_id: str,
    store_url: str,
    files: list[IngestSummary],
    promotion: PromotionSummary,
    rejects_file: Path,
    seconds: float,
) -> BackfillSummary:
    return BackfillSummary(
        run_id=run_id,
        store=store_url,
        files=files,
        turns_read=sum(f.turns_read for f in files),
        turns_inserted=sum(f.turns_inserted for f in files),
        duplicates_skipped=sum(f.duplicates_skipped for f in files),
        rejected=sum(f.rejected for f in files),
        identity_conflicts=sum(f.identity_conflicts for f in files),
        skipped_empty=sum(f.skipped_empty for f in files),
        skipped_erased=sum(f.skipped_erased for f in files),
        failed_files=[f.path for f in files if f.failed],
        users=UserCount.summed(f.users for f in files),
        rejects_path=str(rejects_file) if rejects_file.exists() else None,
        sessions=promotion.sessions,
        snapshots_created=promotion.snapshots_created,
        turns_promoted=promotion.turns_promoted,
        seconds=round(seconds, 3),
    )


def run_counts(summary: BackfillSummary) -> dict[str, int]:
    return {
        "files": len(summary.files),
        "turns_read": summary.turns_read,
        "turns_inserted": summary.turns_inserted,
        "duplicates_skipped": summary.duplicates_skipped,
        "rejected": summary.rejected,
        "skipped_empty": summary.skipped_empty,
        "failed_files": len(summary.failed_files),
        "sessions": summary.sessions,
        "snapshots_created": summary.snapshots_created,
        "turns_promoted": summary.turns_promoted,
    }


ARTIFACT_FILES = 100
"""The backfill's table artifact lists each file up to this many; beyond, the files with
rejects or not read to the end (up to as many), then one row for all the others."""


def artifact_rows(files: list[IngestSummary]) -> list[dict[str, object]]:
    """The backfill's table artifact: a person reads it in the Prefect UI, so a directory of
    20,000 files is the files worth a look and one row of totals for the rest (the run's
    summary, and ``--json``, keep every file)."""
    if len(files) <= ARTIFACT_FILES:
        return [f.model_dump() for f in files]
    flagged = set([n for n, f in enumerate(files) if f.rejected or f.failed][:ARTIFACT_FILES])
    noted = [f for n, f in enumerate(files) if n in flagged]
    rest = [f for n, f in enumerate(files) if n not in flagged]
    totals: dict[str, object] = {"path": f"the other {len(rest)} files", "format": ""}
    for count in ("turns_read", "turns_inserted", "duplicates_skipped", "rejected"):
        totals[count] = sum(getattr(f, count) for f in rest)
    return [*(f.model_dump() for f in noted), totals]
