"""Add up what the backfill's tasks did into the flow's summary: per file while a run reads
few files, by sums beyond (a result Prefect walks stays small; the rejects file and the run's
artifact name the files worth a look)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from mempipe.schemas.summaries import (
    LISTED_FILES,
    BackfillSummary,
    IngestSummary,
    IngestTotals,
    Owner,
    PromotionSummary,
    ReadCounts,
    UserCount,
)


def tally_files(files: Iterable[IngestSummary]) -> IngestTotals:
    """A group's files as one result: every file listed up to :data:`LISTED_FILES`, beyond
    that the noteworthy ones only, up to as many."""
    totals = IngestTotals()
    users: Counter[Owner] = Counter()
    for file in files:
        totals.files_read += 1
        totals.counts.add(file)
        UserCount.count_into(users, file.users)
        if file.failed:
            totals.failed_files.append(file.path)
        if totals.files_read == LISTED_FILES + 1:
            totals.listed = _noteworthy(totals.listed)
        if totals.files_read <= LISTED_FILES or (
            file.noteworthy and len(totals.listed) < LISTED_FILES
        ):
            totals.listed.append(file)
    totals.users = UserCount.of(users)
    return totals


def _noteworthy(files: list[IngestSummary]) -> list[IngestSummary]:
    return [f for f in files if f.noteworthy][:LISTED_FILES]


def summarize_backfill(
    run_id: str,
    store_url: str,
    groups: list[IngestTotals],
    promotion: PromotionSummary,
    rejects_file: Path,
    seconds: float,
) -> BackfillSummary:
    counts = ReadCounts()
    for group in groups:
        counts.add(group.counts)
    files_read = sum(group.files_read for group in groups)
    listed = [file for group in groups for file in group.listed]
    return BackfillSummary(
        run_id=run_id,
        store=store_url,
        files=listed if files_read <= LISTED_FILES else _noteworthy(listed),
        files_read=files_read,
        **counts.model_dump(),
        failed_files=[path for group in groups for path in group.failed_files],
        users=UserCount.summed(group.users for group in groups),
        rejects_path=str(rejects_file) if rejects_file.exists() else None,
        sessions=promotion.sessions,
        snapshots_created=promotion.snapshots_created,
        turns_promoted=promotion.turns_promoted,
        seconds=round(seconds, 3),
    )


def run_counts(summary: BackfillSummary) -> dict[str, int]:
    return {
        "files": summary.files_read,
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


def artifact_rows(summary: BackfillSummary) -> list[dict[str, object]]:
    """The backfill's table artifact, read by a person in the Prefect UI: the files the summary
    lists, then one row of sums for the files it does not."""
    rows: list[dict[str, object]] = [f.model_dump(exclude={"users"}) for f in summary.files]
    others = summary.files_read - len(summary.files)
    if others:
        rest = ReadCounts.model_validate(summary, from_attributes=True)
        for file in summary.files:
            for name, value in ReadCounts.model_validate(file, from_attributes=True):
                setattr(rest, name, getattr(rest, name) - value)
        rows.append({"path": f"the other {others} files", "format": "", **rest.model_dump()})
    return rows
