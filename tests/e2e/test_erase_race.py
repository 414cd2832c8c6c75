"""An erase that lands while jobs of the same user run, with real processes (DESIGN rule: an
erase is final; once it commits, no run in any process writes anything of that owner again).

The fake model endpoint holds every request about the erased user until the ``mempipe erase``
process has exited: the running job has read the user's data and is mid-way through it when
the erase commits, which is the window a slow provider opens in production. Afterwards the store
holds no turn, snapshot, private memory, vector or unredacted audit row of the user, search in
every mode finds nothing of theirs, and the other users' work is complete.
"""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from mempipe.adapters.embedding import embedder_for
from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.search import search
from tests.fakes.openai_server import Answer, completion, embeddings, fake_openai, memories
from tests.helpers import MEMORY_TABLES, airport, invoke, read, write_config, write_named_archive
from tests.processes import environment, start

pytestmark = [
    pytest.mark.prefect,
    pytest.mark.process("the job in a process of its own, the erase committing meanwhile"),
]
USERS = 300
ERASED = "user150"


class HeldForErase:
    """Answers like a model, but holds each request that names the erased user until told."""

    def __init__(self, dimensions: int = 16) -> None:
        self.released = threading.Event()
        self.held = threading.Event()
        self.dimensions = dimensions

    def __call__(self, body: dict[str, Any]) -> Answer:
        if ERASED in json.dumps(body):
            self.held.set()
            self.released.wait(timeout=120)
        if "input" in body:
            return embeddings(body, self.dimensions)
        if "response_format" not in body:
            return completion("ADD" if "Existing" in json.dumps(body) else "A travel profile.")
        text = json.dumps(body["messages"][-1]["content"])
        said = text.split("home airport is ", 1)[-1][:3]
        return memories({"text": f"User's home airport is {said}.", "label": "home_airport"})


def nothing_of_the_erased_user(db: Path, store_url: str) -> None:
    assert read(db, f"SELECT count(*) FROM turns WHERE user_id = '{ERASED}'") == [(0,)]
    assert read(db, f"SELECT count(*) FROM snapshots WHERE user_id = '{ERASED}'") == [(0,)]
    for kind in MEMORY_TABLES:
        assert read(
            db,
            f"SELECT count(*) FROM memories_{kind} WHERE user_id = '{ERASED}' "
            "AND visibility = 'private'",
        ) == [(0,)], kind
    assert read(
        db, f"SELECT count(*) FROM audit WHERE user_id = '{ERASED}' AND text <> '[erased]'"
    ) == [(0,)]
    for collection, table in read(db, "SELECT collection, vector_table FROM embedding_registry"):
        source = "turns" if collection == "stm" else f"memories_{collection}"
        assert read(
            db,
            f"SELECT count(*) FROM {table} WHERE memory_rowid NOT IN (SELECT rowid FROM {source})",
        ) == [(0,)], f"orphan vectors in {table}"
    store = open_store(store_url, migrate=True)
    try:
        for source, mode in itertools.product(("stm", "semantic", "episodic"), SearchMode):
            for scope in (ReadFilter(user_id=ERASED), ReadFilter()):
                hits = search(
                    UnitOfWork(store),
                    embedder_for,
                    f"I am {ERASED} home airport",
                    source,
                    mode,
                    scope,
                    50,
                ).hits
                assert [h.id for h in hits if h.user_id == ERASED] == [], (source, mode)
    finally:
        store.close()


@pytest.fixture
def loaded(prefect_server, tmp_path) -> tuple[Path, list[str], dict[str, str]]:
    write_named_archive(tmp_path / "archive.jsonl", USERS)
    config = write_config(tmp_path, model="hashing-64")
    args = ["--store", f"sqlite:///{tmp_path / 'memory.db'}", "--config", str(config)]
    done = invoke("backfill", "archive.jsonl", "--embed", *args, cwd=tmp_path)
    assert done.exit_code == 0, done.output
    return tmp_path / "memory.db", args, environment(prefect_server)


def erase_while_held(held: HeldForErase, job, args: list[str], folder: Path) -> dict:
    """Wait until the job is held on the erased user, erase them (in this process), then let
    the job go on."""
    assert held.held.wait(timeout=240), f"the job never reached {ERASED}: {job.poll()}"
    erased = invoke("erase", "--user-id", ERASED, "--yes", *args, "--json", cwd=folder)
    held.released.set()
    assert erased.exit_code == 0, erased.output
    return json.loads(erased.stdout)


def test_an_erase_during_a_replay_of_the_same_user_sticks(loaded) -> None:
    db, args, env = loaded
    held = HeldForErase()
    with fake_openai() as (fake, url):
        fake.responder = held
        job_env = {**env, "MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        replay = start(
            ["replay", "--extractor", "openai", "--handlers", "semantic", *args, "--json"],
            db.parent,
            job_env,
        )
        erase_while_held(held, replay, args, db.parent)
        out, err = replay.communicate(timeout=600)

    assert replay.returncode == 0, err
    summary = json.loads(out)
    print(f"replay: {summary['done']} done, {summary['erased_meanwhile']} erased meanwhile")
    assert summary["erased_meanwhile"] > 0, "the erase landed while the user's work was in flight"
    assert summary["done"] == summary["extractions"], "every other extraction is done"
    nothing_of_the_erased_user(db, f"sqlite:///{db}")
    others = read(db, "SELECT count(DISTINCT user_id) FROM memories_semantic")
    assert others == [(USERS - 1,)], "every other user's facts were written"


def erase_during(
    job: list[str], before: list[list[str]], tmp_path: Path, prefect_server: str, monkeypatch
) -> Path:
    """Run the ``before`` commands, then ``job`` against an endpoint (embedding with
    ``openai:fake-embed:16``) that holds the erased user's requests; erase them meanwhile; the
    job ends 0 and nothing of the user is left. Returns the store's path."""
    config = write_config(tmp_path, model="openai:fake-embed:16")
    db = tmp_path / "memory.db"
    args = ["--store", f"sqlite:///{db}", "--config", str(config)]
    held = HeldForErase()
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 16)
        provider = {"MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        for command in before:
            done = invoke(*command, *args, cwd=tmp_path, env=provider)
            assert done.exit_code == 0, done.output
        fake.responder = held
        process = start([*job, *args, "--json"], tmp_path, environment(prefect_server, **provider))
        erase_while_held(held, process, args, tmp_path)
        _out, err = process.communicate(timeout=600)

        assert process.returncode == 0, err
        monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        nothing_of_the_erased_user(db, f"sqlite:///{db}")
    return db


def test_an_erase_during_a_backfill_that_embeds_the_same_user_sticks(
    prefect_server, tmp_path, monkeypatch
) -> None:
    write_named_archive(tmp_path / "archive.jsonl", USERS)
    job = ["backfill", "archive.jsonl", "--embed", "--batch-size", "50"]
    db = erase_during(job, [], tmp_path, prefect_server, monkeypatch)
    assert read(db, "SELECT count(DISTINCT user_id) FROM turns") == [(USERS - 1,)]


def test_an_erase_during_an_import_of_the_same_users_memories_sticks(
    prefect_server, tmp_path, monkeypatch
) -> None:
    records = [
        {
            "id": f"m-{user:03d}",
            "memory": f"I am user{user:03d}; my home airport is {airport(user, 0)}.",
            "user_id": f"user{user:03d}",
            "created_at": "2024-07-26T10:29:36Z",
        }
        for user in range(USERS)
    ]
    (tmp_path / "mem0.json").write_text(json.dumps({"results": records}))
    write_named_archive(tmp_path / "archive.jsonl", USERS)
    job = ["import", "mem0.json", "--format", "mem0"]
    backfill = ["backfill", "archive.jsonl", "--embed"]
    db = erase_during(job, [backfill], tmp_path, prefect_server, monkeypatch)
    assert read(db, "SELECT count(DISTINCT user_id) FROM memories_semantic") == [(USERS - 1,)]


def test_an_erase_during_a_preview_of_the_same_user_sticks(loaded) -> None:
    """Issue 54: a preview is a writer of the user's text too (its kept answers): held on the
    erased user's question when the erase commits, it asks nothing more for them, keeps nothing
    of theirs, and previews the others' work."""
    db, args, env = loaded
    held = HeldForErase()
    with fake_openai() as (fake, url):
        fake.responder = held
        job_env = {**env, "MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        preview = start(
            [
                "replay",
                "--extractor",
                "openai",
                "--handlers",
                "semantic",
                "--preview",
                *args,
                "--json",
            ],
            db.parent,
            job_env,
        )
        erase_while_held(held, preview, args, db.parent)
        asked_after = len(fake.requests)
        out, err = preview.communicate(timeout=600)
        named_after = [b for b in fake.requests[asked_after:] if ERASED in json.dumps(b)]

    assert preview.returncode == 0, err
    found = json.loads(out)
    assert found["erased_meanwhile"] > 0, "the erase landed while the preview asked"
    assert found["failed"] == 0, "no question of a snapshot the erase removed"
    assert named_after == [], "nothing more was asked for the erased user"
    kept = db.parent / "kept-answers"
    holding = [p for p in kept.rglob("*") if p.is_file() and ERASED.encode() in p.read_bytes()]
    assert holding == [], f"kept answers of the erased user: {holding}"
    assert any(kept.rglob("*.json")), "the other users' answers are kept for the replay"
    nothing_of_the_erased_user(db, f"sqlite:///{db}")
