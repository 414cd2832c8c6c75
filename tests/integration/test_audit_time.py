"""Audit time both ways: every row carries when it was applied (its run's day) and when its
evidence was observed (the snapshot's time); a report selects on either; the audit of a run
that was killed before its export reaches Parquet with the next replay, once."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.audit import AuditSelection, AuditTime
from mempipe.schemas.run import RunRecord, RunStatus
from mempipe.services.report.audit import export_earlier_runs, scan_audit
from tests.stores import load, replay_all, replay_context


def replayed(store, tmp_path: Path, run_id: str = "run") -> None:
    load(store, tmp_path)
    store.start_run(RunRecord(run_id=run_id, flow="replay", started_at=datetime.now(UTC)))
    replay_all(store, replay_context(run_id=run_id))


def test_each_row_carries_the_time_its_evidence_was_observed(store, tmp_path) -> None:
    replayed(store, tmp_path)
    rows = list(store.audit_rows())
    times = store.snapshot_times([r.snapshot_id for r in rows])
    assert rows
    assert all(r.observed_at == times[r.snapshot_id] for r in rows)
    may = list(
        store.audit_rows(
            AuditSelection(since="2024-05-01", until="2024-05-31", by=AuditTime.OBSERVED)
        )
    )
    june = list(
        store.audit_rows(
            AuditSelection(since="2024-06-01", until="2024-06-30", by=AuditTime.OBSERVED)
        )
    )
    assert len(may) + len(june) == len(rows)
    assert june
    assert all(r.observed_at.month == 6 for r in june)
    assert list(store.audit_rows(AuditSelection(since="2024-06-01", until="2024-06-30"))) == [], (
        "applied: today"
    )


def test_a_killed_runs_audit_is_exported_by_the_next_replay_once(store, tmp_path) -> None:
    replayed(store, tmp_path, run_id="killed")
    store.finish_run("killed", RunStatus.FAILED, {}, "died: killed")
    out = tmp_path / "audit"

    assert export_earlier_runs(UnitOfWork(store), out, current="now") == ["killed"]
    exported = pl.read_parquet(out / "**" / "*.parquet")
    assert exported.height == len(list(store.audit_rows(AuditSelection(run_id="killed"))))
    assert export_earlier_runs(UnitOfWork(store), out, current="now") == [], "once"
    assert pl.read_parquet(out / "**" / "*.parquet").height == exported.height


@pytest.mark.prefect
def test_report_selects_by_observed_days(store_url, tmp_path) -> None:
    from mempipe.flows.backfill import backfill_flow
    from mempipe.flows.replay import replay_flow
    from mempipe.flows.report import audit_report_flow

    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-64\n")
    sample = Path(__file__).parents[2] / "examples" / "sample-archive"
    backfill_flow(paths=[str(sample)], user_id="maya", store=store_url, config=str(config))
    audit_dir = str(tmp_path / "audit")
    replayed_run = replay_flow(store=store_url, config=str(config), audit_dir=audit_dir)
    june = dict(since=datetime(2024, 6, 1).date(), until=datetime(2024, 6, 30).date())

    observed = audit_report_flow(**june, by=AuditTime.OBSERVED, out=audit_dir, store=store_url)
    applied = audit_report_flow(**june, out=audit_dir, store=store_url)

    assert observed.rows >= 1
    assert applied.rows == 0, "nothing was applied in June 2024"
    assert scan_audit(Path(audit_dir)).collect().height == sum(
        (replayed_run.added, replayed_run.updated, replayed_run.reinforced)
    ), "the files stay whole: every row of the run-day"
