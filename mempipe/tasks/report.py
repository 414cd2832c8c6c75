"""Summarise an audit export with polars and the store's failures."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from prefect import task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bootstrap import given_store
from mempipe.schemas.audit import AuditTime
from mempipe.schemas.report import ActionCount, ReportSummary
from mempipe.schemas.run import FileKind
from mempipe.services.audit import action_table, in_observed_range, scan_audit
from mempipe.services.report_page import PageFigures, gather, write_page
from mempipe.services.written_files import record_written


@task(name="summarize-audit", cache_policy=NO_CACHE)
@given_store(read_only=True)
def summarize_audit(
    uow: UnitOfWork,
    out_dir: str,
    files: list[str],
    run_id: str | None,
    since: str | None,
    until: str | None,
    by: AuditTime = AuditTime.APPLIED,
) -> ReportSummary:
    """Failures are counted by the day they were recorded, whatever ``by`` says."""
    actions: list[ActionCount] = []
    rows = 0
    if files:
        frame = scan_audit([Path(f) for f in files])
        if by is AuditTime.OBSERVED:
            frame = in_observed_range(frame, since, until)
        rows = int(frame.select(pl.len()).collect().item())
        actions = [ActionCount.model_validate(r) for r in action_table(frame)]
    failures = uow.audit.failure_counts(run_id, since, until)
    return ReportSummary(out=out_dir, files=files, rows=rows, actions=actions, failures=failures)


@task(name="render-report-page", cache_policy=NO_CACHE)
@given_store()
def render_report_page(
    uow: UnitOfWork,
    files: list[str],
    since: str | None,
    until: str | None,
    by: AuditTime,
    path: str,
) -> tuple[str, PageFigures]:
    frame = None
    if files:
        frame = scan_audit([Path(f) for f in files])
        if by is AuditTime.OBSERVED:
            frame = in_observed_range(frame, since, until)
    data = gather(uow, frame, since, until, by.value)
    record_written(uow, path, FileKind.REPORT, None, None)
    return str(write_page(data, Path(path))), data
