"""The replay and audit-report flows on a real Prefect server: the Parquet audit shows ADD,
UPDATE and REINFORCE; the enabled-extractions configuration is honoured."""

from __future__ import annotations

import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from mempipe.adapters.store import open_store
from mempipe.domain.liveness import this_process
from mempipe.flows.backfill import backfill_flow
from mempipe.flows.replay import replay_flow
from mempipe.flows.report import audit_report_flow
from mempipe.schemas.run import RunRecord, RunStatus
from mempipe.schemas.work import WorkQuery
from mempipe.services.replay.owner_work import owner_lease
from mempipe.services.report.audit import scan_audit

pytestmark = pytest.mark.prefect
SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"


def config(tmp_path: Path, enabled: str = "[semantic, episodic, procedural, taxonomic]") -> str:
    path = tmp_path / "project-config.yaml"
    path.write_text(
        f"memory:\n  extraction:\n    enabled: {enabled}\n  embedding:\n    model: hashing-128\n"
    )
    return str(path)


def load_sample(store_url: str, cfg: str, tmp_path: Path) -> None:
    backfill_flow(
        paths=[str(SAMPLE)],
        user_id="maya",
        store=store_url,
        config=cfg,
        rejects_dir=str(tmp_path / "rejects"),
    )


def test_replay_audits_add_update_reinforce_in_parquet_and_report_summarises_it(
    prefect_server, store_url, tmp_path
) -> None:
    cfg = config(tmp_path)
    load_sample(store_url, cfg, tmp_path)
    audit_dir = tmp_path / "audit"
    summary = replay_flow(store=store_url, config=cfg, audit_dir=str(audit_dir), concurrency=2)
    assert (summary.extractions, summary.done) == (24, 24)
    assert (summary.added, summary.updated, summary.reinforced) == (8, 2, 1)
    frame = scan_audit(audit_dir).collect()
    assert set(frame["action"]) == {"ADD", "UPDATE", "REINFORCE"}
    assert frame.height == 11
    update = frame.filter(pl.col("text") == "User's home airport is LIS.").row(0, named=True)
    assert update["action"] == "UPDATE"
    assert update["version"] == 2
    store = open_store(store_url, migrate=True)
    assert store.get_memory("semantic", update["superseded_id"])["status"] == "superseded"
    store.close()
    assert all(p.parent.name.startswith("day=") for p in audit_dir.rglob("*.parquet"))

    report = audit_report_flow(
        run_id=summary.run_id, out=str(audit_dir), store=store_url, config=cfg
    )
    assert report.rows == 11
    counts = {(a.memory_type, a.action): a.count for a in report.actions}
    assert counts[("semantic", "UPDATE")] == 2
    assert report.failures == {"environmental": 0, "content": 0}
    assert scan_audit(audit_dir).collect().height == 11, "exporting again duplicates nothing"

    again = replay_flow(store=store_url, config=cfg, audit_dir=str(audit_dir))
    assert again.extractions == 0


def test_a_disabled_type_is_not_extracted(prefect_server, store_url, tmp_path) -> None:
    cfg = config(tmp_path, enabled="[semantic]")
    load_sample(store_url, cfg, tmp_path)
    summary = replay_flow(store=store_url, config=cfg, audit_dir=str(tmp_path / "audit"))
    assert summary.extractions == 6
    store = open_store(store_url, migrate=True)
    stats = store.stats()
    store.close()
    assert set(stats.extraction) == {"semantic"}
    assert stats.memories["taxonomic"] == {"active": 0, "superseded": 0}


def the_owner(store) -> str:
    """The lease of the sample's one owner."""
    work = store.extraction_work(WorkQuery(handlers=["semantic"]))
    assert len({item.partition for item in work}) == 1
    return owner_lease(work[0].partition)


def test_an_owner_another_live_replay_holds_is_waited_for_then_replayed(
    prefect_server, store_url, tmp_path
) -> None:
    """A live holder finishes (or dies and is closed); the run ends only once the owner's
    work is done: exit 0 means all of it."""
    cfg = config(tmp_path)
    load_sample(store_url, cfg, tmp_path)
    store = open_store(store_url, migrate=True)
    now = datetime.now(UTC)
    store.start_run(
        RunRecord(
            run_id="elsewhere", flow="replay", started_at=now, heartbeat_at=now, **this_process()
        )
    )
    assert store.acquire_lease(the_owner(store), "elsewhere", timedelta(hours=1)) is None
    release = threading.Timer(3.0, store.finish_run, ("elsewhere", RunStatus.COMPLETED, {}))
    release.start()
    started = time.monotonic()
    done = replay_flow(store=store_url, config=cfg, audit_dir=str(tmp_path / "audit"))
    release.join()
    store.close()
    assert time.monotonic() - started >= 3.0, "it waited for the live holder"
    assert (done.extractions, done.done, done.done_elsewhere) == (24, 24, 0)


def test_an_owner_held_by_a_run_whose_process_is_gone_is_taken_at_once(
    prefect_server, store_url, tmp_path
) -> None:
    cfg = config(tmp_path)
    load_sample(store_url, cfg, tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    store = open_store(store_url, migrate=True)
    now = datetime.now(UTC)
    store.start_run(
        RunRecord(
            run_id="killed",
            flow="replay",
            started_at=now,
            heartbeat_at=now,
            **{**this_process(), "pid": gone.pid},
        )
    )
    assert store.acquire_lease(the_owner(store), "killed", timedelta(hours=1)) is None
    done = replay_flow(store=store_url, config=cfg, audit_dir=str(tmp_path / "audit"))
    killed = store.get_run("killed")
    store.close()
    assert done.done == 24
    assert killed is not None
    assert killed.status is RunStatus.FAILED
    assert "is gone" in (killed.error or "")
