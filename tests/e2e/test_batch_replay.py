"""Replaying extraction through the Batch API (``replay --via batch``), by real ``mempipe``
processes through the real ``openai`` client against the fake Files and Batches endpoints: a
command killed between submitting and applying, resumed without submitting anything twice,
ends with exactly the memories and audit of a live replay; a failed line is that extraction's
recorded failure, done by the next run."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import Answer, completion, fake_openai
from tests.fakes.openai_server import memories as answer_memories
from tests.helpers import (
    audit,
    copy_store,
    extraction_counts,
    invoke,
    memories,
    read,
    write_archive,
    write_config,
)
from tests.processes import environment, kill_when, start

pytestmark = pytest.mark.prefect
USERS = 10
AIRPORT = re.compile(r"My home airport is (\w+)")
BATCH_ENV = {
    "OPENAI_API_KEY": "test",
    "MEMPIPE_BATCH_POLL_FIRST_SECONDS": "0.2",
    "MEMPIPE_BATCH_POLL_MAX_SECONDS": "0.5",
    "MEMPIPE_BATCH_MAX_REQUESTS": "100",
    "MEMPIPE_RETRY_MAX_ATTEMPTS": "2",
    "MEMPIPE_RETRY_MAX_SECONDS": "5",
}


def extractor_model(body: dict[str, Any]) -> Answer:
    """A deterministic model: the home airport a transcript names, as a semantic fact; nothing
    of the other types; a fixed summary."""
    schema = body.get("response_format", {}).get("json_schema", {}).get("name")
    if schema is None:
        return completion("The user updated their travel profile.")
    if schema != "SemanticMemories":
        return answer_memories()
    found = AIRPORT.search(body["messages"][-1]["content"])
    facts = [{"text": f"home airport is {found[1]}", "label": "home airport"}] if found else []
    return answer_memories(*facts)


@pytest.fixture(scope="module")
def loaded(prefect_server, tmp_path_factory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("batch-replay")
    write_archive(folder / "archive.jsonl", USERS)
    config = write_config(folder)
    done = invoke(
        "backfill",
        "archive.jsonl",
        "--store",
        "sqlite:///loaded.db",
        "--config",
        str(config),
        cwd=folder,
    )
    assert done.exit_code == 0, done.output
    return {"folder": folder, "config": config}


def copy(loaded: dict[str, Any], tmp_path: Path, name: str) -> tuple[Path, list[str]]:
    db = tmp_path / name
    copy_store(loaded["folder"] / "loaded.db", db)
    return db, ["--store", f"sqlite:///{db}", "--config", str(loaded["config"])]


@pytest.mark.process("a replay killed with SIGKILL between its batches' submit and apply")
def test_a_batch_replay_killed_between_submit_and_apply_ends_as_a_live_replay(
    prefect_server, loaded, tmp_path
) -> None:
    live_db, live_args = copy(loaded, tmp_path, "live.db")
    db, args = copy(loaded, tmp_path, "batch.db")
    replay = ["replay", "--extractor", "openai", "--json", "--audit-dir", str(tmp_path / "a")]
    with fake_openai() as (fake, url):
        fake.responder = extractor_model
        provider = {"MEMPIPE_LLM_BASE_URL": url, **BATCH_ENV}
        env = environment(prefect_server, **provider)
        live = invoke(*replay, *live_args, cwd=tmp_path, env=provider)
        assert live.exit_code == 0, live.stderr

        plan = json.loads(
            invoke(*replay, "--via", "batch", "--plan", *args, cwd=tmp_path, env=provider).stdout
        )
        fake.batches.delay = 3600
        killed = start([*replay, "--via", "batch", *args], tmp_path, env)

        def all_submitted() -> bool:
            recorded = read(db, "SELECT count(*) FROM provider_batches WHERE status = 'submitted'")
            return len(fake.batches.lines) == plan["requests"] and recorded[0][0] == len(
                fake.batches.batches
            )

        kill_when(killed, all_submitted)
        assert extraction_counts(db) == Counter({"pending": USERS * 6 * 4})
        submitted = Counter(line["custom_id"] for line in fake.batches.lines)
        fake.batches.delay = 0
        resumed = invoke(*replay, "--via", "batch", *args, cwd=tmp_path, env=provider)

    assert resumed.exit_code == 0, resumed.stderr
    assert Counter(line["custom_id"] for line in fake.batches.lines) == submitted
    assert max(submitted.values()) == 1, "no request submitted twice"
    assert len(fake.batches.batches) == plan["batch_files"] > 1
    assert json.loads(resumed.stdout)["extractions"] == USERS * 6 * 4
    assert memories(db) == memories(live_db), "the memories of a live replay"
    assert audit(db) == audit(live_db), "and the same reconciliation"
    assert extraction_counts(db) == extraction_counts(live_db) == Counter({"done": USERS * 24})


def test_a_failed_line_is_that_extractions_recorded_failure_and_the_next_run_does_it(
    prefect_server, loaded, tmp_path
) -> None:
    db, args = copy(loaded, tmp_path, "batch.db")
    replay = ["replay", "--extractor", "openai", "--via", "batch", "--json", *args]
    replay += ["--user-id", "user001", "--audit-dir", str(tmp_path / "a")]
    [(snapshot,)] = read(
        db, "SELECT id FROM snapshots WHERE user_id = 'user001' ORDER BY rowid LIMIT 1"
    )
    with fake_openai() as (fake, url):
        fake.responder = extractor_model
        fake.batches.failing = {f"semantic:{snapshot}"}
        provider = {"MEMPIPE_LLM_BASE_URL": url, **BATCH_ENV}
        failed = invoke(*replay, cwd=tmp_path, env=provider)
        assert failed.exit_code == 1, failed.stderr
        document = json.loads(failed.stdout)
        assert document["failed_retryable"] == 1
        assert document["done"] == 6 * 4 - 1
        failures = read(db, "SELECT snapshot_id, handler, failure_class FROM failures")
        assert failures == [(snapshot, "semantic", "environmental")]

        fake.batches.failing = set()
        lines = len(fake.batches.lines)
        rerun = invoke(*replay, cwd=tmp_path, env=provider)
    assert rerun.exit_code == 0, rerun.stderr
    assert [line["custom_id"] for line in fake.batches.lines[lines:]] == [f"semantic:{snapshot}"]
    assert extraction_counts(db)["done"] == 6 * 4
