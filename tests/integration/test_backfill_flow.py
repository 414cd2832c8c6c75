"""The backfill flow run for real on a Prefect server: summary, store, run record, artifacts."""

from __future__ import annotations

import asyncio
import json
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

from mempipe.adapters.store import open_store
from mempipe.flows.migrate import migrate_flow
from mempipe.flows.promote import promote_flow
from mempipe.migrations import all_migrations
from mempipe.schemas.run import RunStatus
from tests.stores import run_backfill

pytestmark = pytest.mark.prefect


def test_backfill_loads_turns_promotes_snapshots_and_records_the_run(
    prefect_server, store_url, fixtures, tmp_path
) -> None:
    summary = run_backfill(prefect_server, store_url, [fixtures], tmp_path)
    assert len(summary.files) == 6
    assert (summary.turns_inserted, summary.duplicates_skipped, summary.rejected) == (34, 0, 0)
    assert summary.rejects_path is None
    assert summary.sessions == 12
    assert summary.turns_promoted == 34
    assert summary.snapshots_created == 13, "cg-lisbon has an hour's pause: an idle cut"

    store = open_store(store_url, migrate=True)
    stats = store.stats()
    assert (stats.turns, stats.unpromoted_turns, stats.sessions) == (34, 0, 12)
    assert stats.snapshots["total"] == summary.snapshots_created
    run = store.get_run(summary.run_id)
    assert run is not None
    assert run.status is RunStatus.COMPLETED
    assert run.counts["turns_inserted"] == 34
    assert run.parameters["org_id"] == "acme"
    store.close()

    again = run_backfill(prefect_server, store_url, [fixtures], tmp_path)
    assert (again.turns_inserted, again.duplicates_skipped, again.snapshots_created) == (0, 34, 0)


def test_backfill_publishes_progress_and_summary_artifacts(
    prefect_server, store_url, fixtures, tmp_path
) -> None:
    summary = run_backfill(prefect_server, store_url, [fixtures / "turns.jsonl"], tmp_path)

    async def artifacts():
        async with get_client() as client:
            flow_run = await client.read_flow_run(UUID(summary.run_id))
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run.id])
                )
            )
            return flow_run, found

    flow_run, found = asyncio.run(artifacts())
    assert flow_run.state.is_completed()
    kinds = {a.type for a in found}
    assert {"progress", "table"} <= kinds
    progress = [a for a in found if a.type == "progress"]
    assert all(float(a.data) == 100.0 for a in progress)
    table = next(a for a in found if a.type == "table")
    rows = json.loads(table.data)
    assert rows[0]["turns_inserted"] == 4


def test_rejects_are_written_and_reported_by_the_flow(prefect_server, store_url, tmp_path) -> None:
    archive = tmp_path / "broken.jsonl"
    archive.write_text(
        '{"session_id": "s", "role": "user", "content": "fine"}\n{oops\n'
        '{"session_id": "s", "role": "alien", "content": "?"}\n'
    )
    summary = run_backfill(prefect_server, store_url, [archive], tmp_path)
    assert (summary.turns_inserted, summary.rejected) == (1, 2)
    assert summary.rejects_path is not None
    with open(summary.rejects_path) as written:
        lines = [json.loads(x) for x in written.read().splitlines()]
    assert [r["line"] for r in lines] == [2, 3]


def test_a_failed_backfill_is_recorded_as_failed_never_as_an_empty_success(
    prefect_server, store_url, tmp_path
) -> None:
    from mempipe.errors import ArchiveError

    with pytest.raises(ArchiveError, match="no such file"):
        run_backfill(prefect_server, store_url, [tmp_path / "gone.jsonl"], tmp_path)
    store = open_store(store_url, migrate=True)
    rows = store._conn.execute("SELECT status, error FROM runs").fetchall()
    store.close()
    assert len(rows) == 1
    assert rows[0][0] == "failed"
    assert "no such file" in rows[0][1]


def test_a_bad_parameter_fails_before_the_run_starts(prefect_server, store_url, tmp_path) -> None:
    from prefect.exceptions import ParameterTypeError

    with pytest.raises(ParameterTypeError, match="batch_size"):
        run_backfill(prefect_server, store_url, [tmp_path], tmp_path, batch_size=0)
    with pytest.raises(ParameterTypeError, match="format"):
        run_backfill(prefect_server, store_url, [tmp_path], tmp_path, format="word-doc")


def test_promote_and_migrate_flows(prefect_server, store_url, fixtures, tmp_path) -> None:
    summary = run_backfill(
        prefect_server, store_url, [fixtures / "turns.jsonl"], tmp_path, promote_sessions=False
    )
    assert summary.snapshots_created == 0
    promoted = promote_flow(store=store_url, config=str(tmp_path / "none.yaml"))
    assert (promoted.sessions, promoted.snapshots_created, promoted.turns_promoted) == (2, 2, 4)
    report = migrate_flow(store=store_url, config=str(tmp_path / "none.yaml"))
    assert report.applied == []
    assert report.already_applied == [m.id for m in all_migrations()]


def test_a_command_loads_its_context_once_and_prepares_its_store_once(
    prefect_server, fixtures, tmp_path, monkeypatch
) -> None:
    from mempipe import bootstrap
    from tests.helpers import invoke

    calls = {"settings": 0, "prepare": 0}
    load_settings, prepare_store = bootstrap.load_settings, bootstrap.prepare_store

    def counted_settings(**given):
        calls["settings"] += 1
        return load_settings(**given)

    def counted_prepare(*given, **named):
        calls["prepare"] += 1
        return prepare_store(*given, **named)

    monkeypatch.setattr(bootstrap, "load_settings", counted_settings)
    monkeypatch.setattr(bootstrap, "prepare_store", counted_prepare)
    store = f"sqlite:///{tmp_path / 'once.db'}"
    result = invoke("backfill", str(fixtures / "turns.jsonl"), "--store", store, cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert calls == {"settings": 1, "prepare": 1}, "the runner's context is the flow's"
