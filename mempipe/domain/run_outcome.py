"""When a run counts as done: what each job leaves undone (None when nothing), and the status
its run is recorded with. A run with anything undone fails (exit 1) and says what to do."""

from __future__ import annotations

from collections.abc import Sequence

from mempipe.schemas.replay import ReplayPreview, ReplaySummary
from mempipe.schemas.run import RunStatus


def run_status(stopped_by: str | None, undone: str | None) -> tuple[RunStatus, str | None]:
    """A run stopped by a signal (named by ``stopped_by``) is interrupted, whatever else it
    left; one with work undone failed; else it completed. Returns the status and the error
    to record."""
    if stopped_by is not None:
        return RunStatus.INTERRUPTED, f"stopped by {stopped_by}" + (f"; {undone}" if undone else "")
    return (RunStatus.FAILED if undone else RunStatus.COMPLETED), undone


FILES_NAMED = 3
"""How many unreadable files an error names with their reasons; the rest are counted."""


def unread_files(
    failed: Sequence[tuple[str, str | None]], rejects_path: str | None = None
) -> str | None:
    """Files that could not be read to the end (the rest of each was kept), the first few with
    why, then a count: the reason is where ops look, not only in the rejects file."""
    if not failed:
        return None
    named = "; ".join(
        f"{path}: {_reason(reason)}" if reason else path for path, reason in failed[:FILES_NAMED]
    )
    more = f"; and {len(failed) - FILES_NAMED} more" if len(failed) > FILES_NAMED else ""
    where = f" (see {rejects_path})" if rejects_path else ""
    return f"{len(failed)} file(s) could not be read to the end: {named}{more}{where}"


def _reason(reason: str) -> str:
    return reason.removeprefix("whole file rejected: ")


def vectors_left(provider_failed: int, provider_error: str | None) -> str | None:
    """Records stored without a vector because the provider failed (not because of their
    text): stored all the same, searched by text, and embedded by the next re-embed."""
    if not provider_failed:
        return None
    return (
        f"{provider_failed} record(s) stored without a vector because the provider failed "
        f"({provider_error}); `mempipe reembed --incremental` embeds them once it answers"
    )


def first_undone(*undone: str | None) -> str | None:
    """Everything a run left undone, in one message (None when nothing)."""
    return "; ".join(u for u in undone if u) or None


def preview_left(preview: ReplayPreview) -> str | None:
    """What a preview could not show: the extractions its provider failed (a replay would
    leave them undone too)."""
    if not preview.failed:
        return None
    first = f": {preview.failures[0]}" if preview.failures else ""
    return f"{preview.failed} of {preview.extractions} extraction(s) failed in the preview{first}"


def extractions_left(summary: ReplaySummary) -> str | None:
    """What a replay leaves undone: the extractions that failed, and how to retry them."""
    if not summary.failed_retryable and not summary.failed_content:
        return None
    again = (
        f"; `mempipe replay` again retries the {summary.failed_retryable} retryable one(s)"
        if summary.failed_retryable
        else ""
    )
    why = f"; most with: {summary.failure}" if summary.failure else ""
    return (
        f"{summary.failed_retryable + summary.failed_content} of {summary.extractions} "
        f"extraction(s) failed ({summary.failed_retryable} retryably, {summary.failed_content} "
        f"on content: see `mempipe report --run-id {summary.run_id}`){again}{why}"
    )
