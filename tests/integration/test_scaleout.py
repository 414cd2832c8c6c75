"""Scale-out on a local two-worker Dask cluster gives the same memories, the same audit
actions and the same vectors as the default thread runner."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect import flow

from mempipe.adapters.store import open_store
from mempipe.flows.backfill import backfill_flow
from mempipe.flows.reembed import reembed_flow
from mempipe.flows.replay import replay_flow
from mempipe.scaleout import TaskRunnerName, run_partitions
from mempipe.schemas.replay import ReplaySettings
from mempipe.schemas.selection import SnapshotSelection
from mempipe.tasks.replay import replay_bucket, select_extraction_work
from tests.helpers import audit_actions

pytestmark = [
    pytest.mark.prefect,
    pytest.mark.process("the worker processes of a local Dask cluster"),
]
SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"
HANDLERS = ["semantic", "episodic", "procedural", "taxonomic"]


def replayed(tmp_path: Path, name: str, **runner) -> tuple[str, Path]:
    url = f"sqlite:///{tmp_path / f'{name}.db'}"
    cfg = tmp_path / "project-config.yaml"
    cfg.write_text(
        "memory:\n  extraction:\n    enabled: [semantic, episodic, procedural, taxonomic]\n"
        "  embedding:\n    model: hashing-128\n"
    )
    backfill_flow(paths=[str(SAMPLE)], user_id="maya", store=url, config=str(cfg))
    backfill_flow(  # the same archive again, as sam's: the command's id over the records'
        paths=[str(SAMPLE)],
        user_id="sam",
        project_id="other",
        identity="command",
        store=url,
        config=str(cfg),
    )
    audit = tmp_path / f"audit-{name}"
    summary = replay_flow(store=url, config=str(cfg), audit_dir=str(audit), concurrency=2, **runner)
    assert summary.done == summary.extractions == 48
    return url, audit


def memories(url: str) -> list[tuple]:
    store = open_store(url, migrate=True)
    rows = store._conn.execute(
        "SELECT id, org_id, project_id, user_id, text, status, version, supersedes_id, "
        "reinforcement_count, evidence FROM memories_semantic UNION ALL "
        "SELECT id, org_id, project_id, user_id, text, status, version, supersedes_id, "
        "reinforcement_count, evidence FROM memories_taxonomic ORDER BY 1"
    ).fetchall()
    store.close()
    return rows


def test_replay_and_reembed_on_dask_match_the_default_runner(prefect_server, tmp_path) -> None:
    threads, thread_audit = replayed(tmp_path, "threads")
    dask, dask_audit = replayed(tmp_path, "dask", task_runner="dask")
    assert memories(dask) == memories(threads)
    assert audit_actions(dask_audit) == audit_actions(thread_audit)

    on_threads = reembed_flow(model="hashing-64", store=threads, partitions=3)
    on_dask = reembed_flow(model="hashing-64", store=dask, partitions=3, task_runner="dask")
    assert on_dask.switched
    assert on_threads.switched
    assert [(r.collection, r.records, r.vectors) for r in on_dask.collections] == [
        (r.collection, r.records, r.vectors) for r in on_threads.collections
    ]
    assert all(r.vectors == r.records for r in on_dask.collections)


@flow
def duplicated_partitions(url: str, run_id: str) -> None:
    """Every partition of a replay submitted twice at once, as a retried or duplicated task
    would run it."""
    settings = ReplaySettings(embedding_model="hashing-128")
    parts = select_extraction_work(url, SnapshotSelection(), HANDLERS, False, 2)
    twice = [
        {
            "store_url": url,
            "items": p,
            "settings": settings,
            "run_id": run_id,
            "force": False,
            "selection": SnapshotSelection(),
            "handlers": HANDLERS,
        }
        for p in parts
        for _ in range(2)
    ]
    run_partitions(replay_bucket, twice, TaskRunnerName.THREADS, 4)


def test_a_duplicated_partition_changes_nothing(prefect_server, tmp_path) -> None:
    once, _ = replayed(tmp_path, "once")
    url = f"sqlite:///{tmp_path / 'twice.db'}"
    cfg = tmp_path / "project-config.yaml"
    backfill_flow(paths=[str(SAMPLE)], user_id="maya", store=url, config=str(cfg))
    backfill_flow(  # the same archive again, as sam's: the command's id over the records'
        paths=[str(SAMPLE)],
        user_id="sam",
        project_id="other",
        identity="command",
        store=url,
        config=str(cfg),
    )
    duplicated_partitions(url, "dup")
    assert memories(url) == memories(once)
    store = open_store(url, migrate=True)
    actions = sorted((r.memory_type, r.action, r.text) for r in store.audit_rows())
    store.close()
    reference = open_store(once, migrate=True)
    assert actions == sorted((r.memory_type, r.action, r.text) for r in reference.audit_rows())
    reference.close()
