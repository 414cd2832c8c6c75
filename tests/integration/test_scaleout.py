"""Scale-out on a local two-worker Dask cluster gives the same memories, the same audit
actions and the same vectors as the default thread runner."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from prefect import flow

from mempipe.adapters.store import open_store
from mempipe.flows.backfill import backfill_flow
from mempipe.flows.reembed import reembed_flow
from mempipe.flows.replay import replay_flow
from mempipe.scaleout import TaskRunnerName, run_partitions
from mempipe.schemas.bundle import BundleSelection
from mempipe.schemas.replay import ReplaySettings
from mempipe.schemas.work import WorkQuery
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
    parts = select_extraction_work(url, WorkQuery(handlers=HANDLERS), 2)
    twice = [
        {
            "store_url": url,
            "items": p,
            "settings": settings,
            "run_id": run_id,
            "query": WorkQuery(handlers=HANDLERS),
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


def small_files(folder: Path, files: int) -> Path:
    """``files`` small archives of two users: each holds one session of its own and the second
    half of a session the file before began (a session whose files two workers may read), and
    every tenth file a record that is a reject."""
    folder.mkdir()
    for n in range(files):
        lines = [
            turn(f"own-{n}", seq, f"user{n % 2}", f"file {n} says {seq}", minute=seq)
            for seq in range(2)
        ]
        lines += [
            turn(f"split-{n}", 2 + seq, f"user{n % 2}", f"later {seq}", 2 + seq) for seq in (0, 1)
        ]
        lines += [
            turn(f"split-{n + 1}", seq, f"user{(n + 1) % 2}", f"early {seq}", seq) for seq in (0, 1)
        ]
        if n % 10 == 0:
            lines.append({"session_id": f"own-{n}", "turn_seq": 9, "role": "robot", "content": "x"})
        (folder / f"conversation-{n:03d}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines)
        )
    return folder


def turn(session: str, seq: int, user: str, content: str, minute: int) -> dict:
    return {
        "session_id": session,
        "turn_seq": seq,
        "role": "user" if seq % 2 == 0 else "assistant",
        "content": content,
        "created_at": f"2024-03-01T10:{minute:02d}:00Z",
        "user_id": user,
    }


def stored(url: str) -> dict[str, list[str]]:
    """Every turn and snapshot the store holds, verbatim but for the run that wrote it."""
    store = open_store(url, migrate=True)
    held: dict[str, list[str]] = {}
    for collection in ("turns", "snapshots"):
        records, after = store.export_page(collection, BundleSelection(), None, 10_000)
        assert after is None or not store.export_page(collection, BundleSelection(), after, 1)[0]
        held[collection] = sorted(r.model_dump_json(exclude={"run_id"}) for r in records)
    store.close()
    return held


def accounted(summary) -> list[tuple]:
    return sorted(
        (f.path, f.turns_read, f.turns_inserted, f.duplicates_skipped, f.rejected)
        for f in summary.files
    )


@pytest.mark.parametrize("backend", ["sqlite", "secantus"])
def test_a_backfill_on_dask_writes_what_the_default_runner_writes(
    backend, prefect_server, tmp_path, request
) -> None:
    folder = small_files(tmp_path / "archives", 24)
    if backend == "sqlite":
        urls = [f"sqlite:///{tmp_path / f'{name}.db'}" for name in ("threads", "dask")]
    else:
        base = request.getfixturevalue("secantus_uri")
        urls = [f"{base}/bf_{uuid.uuid4().hex[:8]}?replicaSet=secantus" for _ in range(2)]
    cfg = tmp_path / "project-config.yaml"
    cfg.write_text("memory:\n  embedding:\n    model: hashing-64\n")
    common = {"paths": [str(folder)], "config": str(cfg), "rejects_dir": str(tmp_path / "rejects")}
    on_threads = backfill_flow(store=urls[0], **common)
    on_dask = backfill_flow(store=urls[1], partitions=2, task_runner="dask", **common)

    assert accounted(on_dask) == accounted(on_threads)
    assert on_dask.rejected == on_threads.rejected == 3
    assert on_dask.turns_inserted == on_threads.turns_inserted == 24 * 6
    assert on_dask.snapshots_created == on_threads.snapshots_created == 24 * 2 + 1
    assert stored(urls[1]) == stored(urls[0]), "the same turns and the same snapshots"
    rejects = [Path(s.rejects_path).read_text().splitlines() for s in (on_threads, on_dask)]
    assert [len(lines) for lines in rejects] == [3, 3], "one whole line a reject"
    again = backfill_flow(store=urls[1], partitions=2, task_runner="dask", **common)
    assert (again.turns_inserted, again.duplicates_skipped) == (0, 24 * 6), "a rerun adds nothing"
