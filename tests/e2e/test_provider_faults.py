"""A model provider that fails, hangs, throttles or answers nonsense, met by ``mempipe``
commands (in this process: the exit status and the JSON document are the behaviour, not the
process) through the real ``openai`` client (DESIGN rules: a job that exits 0 has done all its
work; a re-embed that fails leaves the registry exactly as it found it; what a provider returns
is validated where it enters).

Each fault of the fake endpoint against a re-embed: exit 1 naming the cause, serving and search
exactly as before, the run recorded failed, and the same command against a healthy endpoint
resumes and switches. Against a replay: exit 1 with the counts, the run recorded failed, and a
rerun against a healthy endpoint completes. Retry bounds are short, set through the
configuration (``MEMPIPE_RETRY_*``, ``MEMPIPE_LLM_TIMEOUT_SECONDS``), as ops would for a test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mempipe.adapters.embedding import embedder_for
from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.search import search
from tests.fakes.openai_server import (
    FAULTS,
    Answer,
    embeddings,
    fake_openai,
    faulty,
    memories,
)
from tests.helpers import copy_store, invoke, read, write_archive, write_config

pytestmark = pytest.mark.prefect
USERS = 2
NEW_MODEL = "openai:fake-embed:16"
SHORT_BOUNDS = {
    "MEMPIPE_RETRY_MAX_ATTEMPTS": "2",
    "MEMPIPE_RETRY_MAX_SECONDS": "5",
    "MEMPIPE_RETRY_NETWORK_BASE": "0.05",
    "MEMPIPE_RETRY_NETWORK_CAP": "0.1",
    "MEMPIPE_RETRY_RETRY_AFTER_CAP": "0.2",
    "MEMPIPE_LLM_TIMEOUT_SECONDS": "0.5",
    "OPENAI_API_KEY": "test",
}
EMBEDDING_FAULTS = [f for f in FAULTS if f != "empty-choices"]
CHAT_FAULTS = ["500", "hang", "429", "non-json", "text-plain", "empty-choices"]
RESUMED = {"500", "nan", "empty-choices"}
"""The faults after which the test also reruns against a healthy endpoint (the resume does not
depend on which fault stopped the run; each fault's failed run is checked in full)."""


@pytest.fixture(scope="module")
def stores(prefect_server, tmp_path_factory) -> dict[str, Any]:
    """A backfilled store, and the same replayed offline with its turns served by hashing-64."""
    folder = tmp_path_factory.mktemp("faults")
    write_archive(folder / "archive.jsonl", USERS)
    config = write_config(folder)
    common = ["--config", str(config)]
    loaded = invoke(
        "backfill", "archive.jsonl", "--store", "sqlite:///loaded.db", *common, cwd=folder
    )
    assert loaded.exit_code == 0, loaded.output
    copy_store(folder / "loaded.db", folder / "served.db")
    served = ["--store", f"sqlite:///{folder / 'served.db'}", *common]
    for step in (["replay"], ["reembed", "--incremental"]):
        done = invoke(*step, *served, cwd=folder)
        assert done.exit_code == 0, done.output
    before = observed(folder / "served.db")
    assert before[1], "semantic search on turns finds something to lose"
    assert before[2], "semantic search on memories finds something to lose"
    return {"folder": folder, "config": config, "before": before}


def store_copy(stores: dict[str, Any], name: str, tmp_path: Path) -> tuple[Path, list[str]]:
    db = tmp_path / "memory.db"
    copy_store(stores["folder"] / name, db)
    return db, ["--store", f"sqlite:///{db}", "--config", str(stores["config"])]


def answers_the_probe_then(fault: str, dimensions: int):
    """The endpoint answers the re-embed's one-text probe, then fails every batch."""
    failing = faulty(fault, dimensions, hang_s=3)

    def respond(body: dict[str, Any]) -> Answer:
        if body.get("input") == ["mempipe probe"]:
            return embeddings(body, dimensions)
        return failing(body)

    return respond


def observed(db: Path) -> tuple:
    """What serves, and what semantic search answers on turns and on memories (read in this
    process: the store is what the failed run left). A failed move keeps the vectors it wrote,
    unserved, for the rerun to resume from."""
    store = open_store(f"sqlite:///{db}", migrate=True)
    try:
        answers = tuple(
            [
                (h.id, round(h.score, 6))
                for h in search(
                    UnitOfWork(store),
                    embedder_for,
                    "home airport",
                    source,
                    SearchMode.SEMANTIC,
                    ReadFilter(),
                    10,
                ).hits
            ]
            for source in ("stm", "semantic")
        )
    finally:
        store.close()
    return serving(db), *answers


def serving(db: Path) -> dict[str, str]:
    return dict(
        read(db, "SELECT collection, model_id FROM embedding_registry WHERE state = 'serving'")
    )


@pytest.mark.parametrize("fault", EMBEDDING_FAULTS)
def test_a_reembed_against_a_failing_provider_changes_nothing_exits_1_and_resumes(
    fault, prefect_server, stores, tmp_path
) -> None:
    db, args = store_copy(stores, "served.db", tmp_path)
    with fake_openai() as (fake, url):
        fake.responder = answers_the_probe_then(fault, 16)
        faults_env = {"MEMPIPE_LLM_BASE_URL": url, **SHORT_BOUNDS}
        failed = invoke(
            "reembed", "--model", NEW_MODEL, *args, "--json", cwd=tmp_path, env=faults_env
        )

        assert failed.exit_code == 1, failed.output
        document = json.loads(failed.stdout)
        assert document["kind"] == "incomplete"
        assert document["switched"] is False
        assert "the provider failed" in document["error"], document["error"]
        assert sum(c["failed"] for c in document["collections"]) > 0
        assert sum(c["unembeddable"] for c in document["collections"]) == 0, (
            "a provider's failure is not a record's unembeddability"
        )
        after = observed(db)
        assert after == stores["before"], "serving and search exactly as before"
        [(status, error)] = read(
            db,
            "SELECT status, error FROM runs WHERE flow = 'reembed' "
            "ORDER BY started_at DESC LIMIT 1",
        )
        assert (status, "the provider failed" in error) == ("failed", True)

        if fault not in RESUMED:
            return
        fake.responder = lambda body: embeddings(body, 16)
        resumed = invoke(
            "reembed", "--model", NEW_MODEL, *args, "--json", cwd=tmp_path, env=faults_env
        )

    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["switched"] is True
    assert set(serving(db).values()) == {NEW_MODEL}


@pytest.mark.parametrize("fault", CHAT_FAULTS)
def test_a_replay_against_a_failing_provider_exits_1_with_its_counts_and_a_rerun_completes(
    fault, prefect_server, stores, tmp_path
) -> None:
    db, args = store_copy(stores, "loaded.db", tmp_path)
    replay = ["replay", "--extractor", "openai", "--handlers", "semantic", *args, "--json"]
    with fake_openai() as (fake, url):
        fake.responder = faulty(fault, 64, hang_s=3)
        env = {"MEMPIPE_LLM_BASE_URL": url, **SHORT_BOUNDS}
        failed = invoke(*replay, cwd=tmp_path, env=env)

        assert failed.exit_code == 1, failed.output
        document = json.loads(failed.stdout)
        assert document["kind"] == "incomplete"
        assert document["failed_retryable"] == document["extractions"] > 0
        assert document["done"] == 0
        assert "mempipe replay" in document["error"], "names the command that resumes"
        [(status,)] = read(db, "SELECT status FROM runs WHERE flow = 'replay'")
        assert status == "failed"
        assert read(db, "SELECT count(*) FROM failures WHERE failure_class = 'content'") == [(0,)]

        if fault not in RESUMED:
            return
        fake.responder = lambda body: memories(
            {"text": "User's home airport is LIS.", "label": "home_airport"}
        )
        rerun = invoke(*replay, cwd=tmp_path, env=env)

    assert rerun.exit_code == 0, rerun.output
    assert json.loads(rerun.stdout)["done"] == document["extractions"]
