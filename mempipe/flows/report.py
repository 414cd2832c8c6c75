"""Audit report: export the audit of a run or a date range to Parquet, summarise it.

The audit of one run, of ``since`` .. ``until``, or of the ``last_days`` complete UTC
days before today (the daily scheduled report: ``last_days=1`` is yesterday). The days are
those the changes were applied on (``by="applied"``, the default and the files' partition)
or those their evidence was observed on (``by="observed"``: the snapshots' times)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated, ClassVar

from pydantic import Field, field_validator

from mempipe.bootstrap import AppContext, load_context, require_store
from mempipe.errors import ConfigError
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.flows.recorded_run import recorded_run
from mempipe.schemas.audit import AuditTime
from mempipe.schemas.report import ReportSummary
from mempipe.services.report.page import PageFigures, TopMemory
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.report import export_audit, render_report_page, summarize_audit


class Report(Job[ReportSummary]):
    """The request of ``mempipe report``: the options of the command, the parameters of
    :func:`audit_report_flow`. It reads a store that is there and changes none of its data."""

    prepares_store: ClassVar[bool] = False

    run_id: str | None = None
    since: date | None = None
    until: date | None = None
    last_days: Annotated[int, Field(ge=1, le=366)] | None = None
    by: AuditTime = AuditTime.APPLIED
    out: str = "audit"
    html: str | None = None

    @field_validator("since", "until", mode="before")
    @classmethod
    def _day(cls, value: object) -> object:
        return value.date() if isinstance(value, datetime) else value

    def check(self, context: AppContext) -> None:
        require_store(context.store_url)

    def run(self, context: AppContext) -> ReportSummary:
        return audit_report_flow(**self.model_dump(), **context.flow_options())


@job_flow("audit-report")
def audit_report_flow(
    run_id: str | None = None,
    since: date | None = None,
    until: date | None = None,
    last_days: Annotated[int, Field(ge=1, le=366)] | None = None,
    by: AuditTime = AuditTime.APPLIED,
    out: str = "audit",
    html: str | None = None,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> ReportSummary:
    """Export the audit to Parquet and sum it up (the module's notes say which days)."""
    since, until = _days(run_id, since, until, last_days)
    context = load_context(store, config, store_secret)
    first, last = (d.isoformat() if d else None for d in (since, until))
    label = run_id or f"{first or 'start'}_{last or 'end'}"
    asked = {"run_id": run_id, "since": first, "until": last, "by": by.value, "out": out}
    parameters = {k: v for k, v in {**asked, "html": html}.items() if v is not None}
    figures = None
    with recorded_run(context, "audit-report", parameters) as run:
        files = export_audit(context.store_url, out, run_id=run_id, since=first, until=last, by=by)
        costs = context.config.costs
        summary = summarize_audit(context.store_url, out, files, run_id, first, last, by, costs)
        if html is not None:
            summary.html, figures = render_report_page(
                context.store_url, files, first, last, by, html, costs
            )
        run.end({"files": len(files), "rows": summary.rows})
    _publish(summary, label, figures)
    return summary


def _days(
    run_id: str | None, since: date | None, until: date | None, last_days: int | None
) -> tuple[date | None, date | None]:
    """The report's first and last day: as given, or the ``last_days`` before today."""
    if last_days is None:
        return since, until
    if since or until or run_id:
        raise ConfigError("last_days replaces run_id, since and until: give one of them")
    today = datetime.now(UTC).date()
    return today - timedelta(days=last_days), today - timedelta(days=1)


def _publish(summary: ReportSummary, label: str, figures: PageFigures | None) -> None:
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
    if figures is None:
        return
    for key, rows, what in (
        ("audit-actions-by-day", figures.actions, "actions per memory type per day"),
        ("audit-failures-by-day", figures.failures, "failures by class per day"),
        ("audit-most-reinforced", _ids(figures.reinforced), "the most reinforced memories"),
        ("audit-most-updated", _ids(figures.updated), "the most updated memories"),
        ("audit-runs", figures.runs, "the runs"),
    ):
        publish_table(key, rows, f"audit {label}: {what}")


def _ids(rows: list[TopMemory]) -> list[dict[str, object]]:
    """Prefect keeps artifacts where an erase cannot reach: memory ids and counts, no text."""
    return [row.artifact_row() for row in rows]
