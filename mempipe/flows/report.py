"""Audit report: export the audit of a run or a date range to Parquet, summarise it."""

from __future__ import annotations

from datetime import date

from prefect import flow

from mempipe.bootstrap import load_context
from mempipe.schemas.report import ReportSummary
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.replay import export_audit
from mempipe.tasks.report import summarize_audit


@flow(name="audit-report")
def audit_report(
    run_id: str | None = None,
    since: date | None = None,
    until: date | None = None,
    out: str = "audit",
    store: str | None = None,
    config: str | None = None,
) -> ReportSummary:
    context = load_context(store, config)
    first, last = (d.isoformat() if d else None for d in (since, until))
    label = run_id or f"{first or 'start'}_{last or 'end'}"
    files = export_audit(context.store_url, out, run_id=run_id, since=first, until=last)
    summary = summarize_audit(context.store_url, out, files, run_id, first, last)
    publish_table(
        "audit-actions",
        [a.model_dump() for a in summary.actions],
        f"audit {label}: {summary.rows} rows by memory type and action",
    )
    publish_table(
        "audit-failures",
        [{"failure_class": k, "count": v} for k, v in summary.failures.items()],
        f"audit {label}: failures by class",
    )
    return summary
