"""The report job's tasks: export the audit to Parquet (a replay and an import export their own
through it), summarise it with polars and the store's failures, render its page."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.schemas.audit import AuditSelection, AuditTime
from mempipe.schemas.costs import CostConfig
from mempipe.schemas.report import ActionCount, ReportSummary
from mempipe.schemas.run import FileKind
from mempipe.services.report.audit import (
    EXPORTED,
    action_table,
    export_earlier_runs,
    in_observed_range,
    scan_audit,
    write_audit,
    write_observed,
)
from mempipe.services.report.page import PageFigures, gather, spend_by_day, write_page
from mempipe.services.written_files import record_written
from mempipe.tasks.policies import step


@step("summarize-audit")
def summarize_audit(
    store_url: str,
    out_dir: str,
    files: list[str],
    run_id: str | None,
    since: str | None,
    until: str | None,
    by: AuditTime = AuditTime.APPLIED,
    costs: CostConfig | None = None,
) -> ReportSummary:
    """Failures, and what provider requests spent, are counted by the day they were recorded,
    whatever ``by`` says; the spend is priced with ``costs``."""
    with unit_of_work(store_url, read_only=True) as uow:
        actions: list[ActionCount] = []
        rows = 0
        if files:
            frame = scan_audit([Path(f) for f in files])
            if by is AuditTime.OBSERVED:
                frame = in_observed_range(frame, since, until)
            rows = int(frame.select(pl.len()).collect().item())
            actions = [ActionCount.model_validate(r) for r in action_table(frame)]
        failures = uow.audit.failure_counts(run_id, since, until)
        prices = (costs or CostConfig()).prices
        spend = spend_by_day(uow.runs.spend(run_id, since, until), prices)
        return ReportSummary(
            out=out_dir, files=files, rows=rows, actions=actions, failures=failures, spend=spend
        )


@step("render-report-page")
def render_report_page(
    store_url: str,
    files: list[str],
    since: str | None,
    until: str | None,
    by: AuditTime,
    path: str,
    costs: CostConfig | None = None,
) -> tuple[str, PageFigures]:
    with unit_of_work(store_url) as uow:
        frame = None
        if files:
            frame = scan_audit([Path(f) for f in files])
            if by is AuditTime.OBSERVED:
                frame = in_observed_range(frame, since, until)
        data = gather(uow, frame, since, until, by.value, (costs or CostConfig()).prices)
        record_written(uow, path, FileKind.REPORT, None, None)
        return str(write_page(data, Path(path))), data


@step("export-audit")
def export_audit(
    store_url: str,
    out_dir: str,
    run_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
    by: AuditTime = AuditTime.APPLIED,
    mark_exported: bool = False,
) -> list[str]:
    """``mark_exported``: the run's own export (replay's) marks it, so that no later replay
    exports it again (a report only reads the audit)."""
    with unit_of_work(store_url) as uow:
        if by is AuditTime.OBSERVED:
            files = write_observed(uow, Path(out_dir), since, until)
        else:
            files = write_audit(
                uow.audit.audit_rows(AuditSelection(run_id=run_id, since=since, until=until)),
                Path(out_dir),
                uow.files.store_id(),
            )
        if mark_exported and run_id is not None:
            uow.runs.set_checkpoint(run_id, EXPORTED, True)
        if files:
            record_written(uow, out_dir, FileKind.AUDIT, run_id, None)
        return [str(f) for f in files]


@step("export-earlier-audit")
def export_earlier_audit(store_url: str, out_dir: str, current: str) -> list[str]:
    """The audit of earlier runs that never reached Parquet (killed ones), exported once."""
    with unit_of_work(store_url) as uow:
        runs = export_earlier_runs(uow, Path(out_dir), current=current)
        if runs:
            record_written(uow, out_dir, FileKind.AUDIT, current, None)
        if runs:
            get_run_logger().info("exported the audit of %d earlier run(s): %s", len(runs), runs)
        return runs
