"""Re-embedding through the Batch API (``reembed --via batch``), by real ``mempipe`` processes
through the real ``openai`` client against a fake that implements the Files and Batches
endpoints: the batches complete after a delay, lines fail on purpose, a batch expires, a
command is killed between submitting and applying. The end state is compared with a live
re-embed's of the same store."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import embeddings, fake_openai, usage_of
from tests.helpers import copy_store, invoke, read, write_archive, write_config
from tests.processes import environment, kill_when, start

pytestmark = pytest.mark.prefect
USERS = 100
MODEL = "openai:fake-embed:16"
TABLES = {
    "stm": "vec_stm__openai_fake_embed_16",
    "semantic": "vec_semantic__openai_fake_embed_16",
}
BATCH_ENV = {
    "OPENAI_API_KEY": "test",
    "MEMPIPE_BATCH_POLL_FIRST_SECONDS": "0.2",
    "MEMPIPE_BATCH_POLL_MAX_SECONDS": "0.5",
    "MEMPIPE_BATCH_MAX_REQUESTS": "4",
    "MEMPIPE_RETRY_MAX_ATTEMPTS": "2",
    "MEMPIPE_RETRY_MAX_SECONDS": "5",
}


@pytest.fixture(scope="module")
def store(prefect_server, tmp_path_factory) -> dict[str, Any]:
    """A backfilled, replayed store (its turns and memories served by hashing-64)."""
    folder = tmp_path_factory.mktemp("batch")
    write_archive(folder / "archive.jsonl", USERS)
    config = write_config(folder)
    args = ["--store", "sqlite:///base.db", "--config", str(config)]
    for step in (["backfill", "archive.jsonl"], ["replay"], ["reembed", "--incremental"]):
        done = invoke(*step, *args, cwd=folder)
        assert done.exit_code == 0, done.stderr
    return {"folder": folder, "config": config}


def copy(store: dict[str, Any], tmp_path: Path, name: str = "memory.db") -> tuple[Path, list[str]]:
    db = tmp_path / name
    copy_store(store["folder"] / "base.db", db)
    return db, ["--store", f"sqlite:///{db}", "--config", str(store["config"])]


def vectors(db: Path) -> dict[str, dict[int, str]]:
    return {
        collection: dict(read(db, f"SELECT memory_rowid, vec_to_json(embedding) FROM {table}"))
        for collection, table in TABLES.items()
    }


def serving(db: Path) -> dict[str, str]:
    return dict(
        read(db, "SELECT collection, model_id FROM embedding_registry WHERE state = 'serving'")
    )


def wait_until_submitted(process: subprocess.Popen, db: Path, batches: int) -> None:
    """Until the store records ``batches`` batches submitted (the command still running)."""
    deadline = time.monotonic() + 120
    query = "SELECT count(*) FROM provider_batches WHERE status = 'submitted'"
    while read(db, query)[0][0] < batches:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)


def records(db: Path) -> int:
    (turns,) = read(db, "SELECT count(*) FROM turns")[0]
    (semantic,) = read(db, "SELECT count(*) FROM memories_semantic")[0]
    return turns + semantic


@pytest.mark.process("a re-embed killed with SIGKILL between its batches' submit and apply")
def test_a_batch_reembed_killed_between_submit_and_apply_resumes_without_submitting_twice(
    prefect_server, store, tmp_path
) -> None:
    live_db, live_args = copy(store, tmp_path, "live.db")
    db, args = copy(store, tmp_path)
    move = ["reembed", "--model", MODEL, "--collections", "stm,semantic", "--json"]
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 16)
        provider = {"MEMPIPE_LLM_BASE_URL": url, **BATCH_ENV}
        env = environment(prefect_server, **provider)
        live = invoke(*move, *live_args, cwd=tmp_path, env=provider)
        assert live.exit_code == 0, live.stderr

        fake.batches.delay = 3600
        planned = json.loads(
            invoke(*move, "--via", "batch", "--plan", *args, cwd=tmp_path, env=provider).stdout
        )
        killed = start([*move, "--via", "batch", *args], tmp_path, env)
        expected_lines = sum(line["requests"] for line in planned["lines"][1:])

        def all_submitted() -> bool:
            recorded = read(db, "SELECT count(*) FROM provider_batches WHERE status = 'submitted'")
            return len(fake.batches.lines) == expected_lines and recorded[0][0] == len(
                fake.batches.batches
            )

        kill_when(killed, all_submitted)
        submitted = Counter(line["custom_id"] for line in fake.batches.lines)
        assert vectors(db)["semantic"] == {}, "killed before anything was applied"

        fake.batches.delay = 0
        resumed = invoke(*move, "--via", "batch", *args, cwd=tmp_path, env=provider)

    assert resumed.exit_code == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["switched"] is True
    assert Counter(line["custom_id"] for line in fake.batches.lines) == submitted, (
        "the resumed run submitted nothing again"
    )
    assert max(submitted.values()) == 1
    assert len(fake.batches.batches) == planned["batch_files"]
    assert sum(c["batches_adopted"] for c in summary["collections"]) == planned["batch_files"]
    assert vectors(db) == vectors(live_db), "the same vectors as a live re-embed"
    assert serving(db) == serving(live_db)
    assert records(db) == sum(len(v) for v in vectors(db).values()) > 1000
    statuses = read(db, "SELECT status, count(*) FROM provider_batches GROUP BY status")
    assert statuses == [("applied", planned["batch_files"])]
    assert set(fake.batches.files) == set(), "every file deleted at the provider once applied"


def test_failed_lines_and_an_expired_batch_leave_their_records_for_a_rerun(
    prefect_server, store, tmp_path
) -> None:
    db, args = copy(store, tmp_path)
    move = ["reembed", "--model", MODEL, "--collections", "semantic", "--json"]
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 16)
        provider = {"MEMPIPE_LLM_BASE_URL": url, **BATCH_ENV}
        first = min(read(db, "SELECT min(rowid) FROM memories_semantic")[0])
        fake.batches.failing = {f"semantic-{first}-{first + 255}"}
        failed = invoke(*move, "--via", "batch", *args, cwd=tmp_path, env=provider)
        assert failed.exit_code == 1, failed.stderr
        document = json.loads(failed.stdout)
        assert document["switched"] is False
        [report] = document["collections"]
        assert report["failed"] == 256
        assert report["vectors"] == report["records"] - 256
        failures = read(db, "SELECT step, failure_class, error FROM failures")
        assert failures
        assert failures[-1][:2] == ("reembed:semantic", "environmental")
        assert "256 record(s) without a vector" in failures[-1][2]

        fake.batches.failing, fake.batches.expire = set(), True
        expired = invoke(*move, "--via", "batch", *args, cwd=tmp_path, env=provider)
        assert expired.exit_code == 1, expired.stderr
        assert "expired" in json.loads(expired.stdout)["collections"][0]["provider_error"]

        fake.batches.expire = False
        lines_before = len(fake.batches.lines)
        rerun = invoke(*move, "--via", "batch", *args, cwd=tmp_path, env=provider)
    assert rerun.exit_code == 0, rerun.stderr
    assert json.loads(rerun.stdout)["switched"] is True
    resent = fake.batches.lines[lines_before:]
    assert 0 < len(resent) < lines_before, "only the unanswered requests went again"


@pytest.mark.process("a run in another process, cancelled while its batches wait")
def test_runs_cancel_cancels_a_runs_batches_and_the_run_ends_incomplete(
    prefect_server, store, tmp_path
) -> None:
    db, args = copy(store, tmp_path)
    move = ["reembed", "--model", MODEL, "--collections", "semantic", "--json"]
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 16)
        fake.batches.delay = 3600
        provider = {"MEMPIPE_LLM_BASE_URL": url, **BATCH_ENV}
        env = environment(prefect_server, **provider)
        running = start([*move, "--via", "batch", *args], tmp_path, env)
        wait_until_submitted(running, db, 1)
        (run_id,) = read(db, "SELECT run_id FROM provider_batches LIMIT 1")[0]
        cancelled = invoke("runs", "cancel", run_id, *args, "--json", cwd=tmp_path, env=provider)
        assert cancelled.exit_code == 0, cancelled.stderr
        out, err = running.communicate(timeout=120)
    assert running.returncode == 1, err
    assert json.loads(out)["switched"] is False
    # The cancel lists the batches created before it; the run cancels one it made meanwhile.
    listed = json.loads(cancelled.stdout)["cancelled"]
    assert listed
    assert set(listed) <= set(fake.batches.batches)
    assert {b["status"] for b in fake.batches.batches.values()} == {"cancelled"}
    assert read(db, "SELECT DISTINCT status FROM provider_batches") == [("cancelled",)]


def received_tokens(bodies: list[dict[str, Any]]) -> int:
    """The input tokens of what the fake endpoint received, counted as OpenAI counts them."""
    return sum((usage_of(body) or {}).get("prompt_tokens", 0) for body in bodies)


def spent(run_id: str, args: list[str], folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """What ``runs show`` says the run spent, summed."""
    shown = invoke("runs", "show", run_id, *args, "--json", cwd=folder)
    assert shown.exit_code == 0, shown.stderr
    rows = json.loads(shown.stdout)["spend"]
    return {
        "spent requests": sum(r["requests"] for r in rows),
        "spent input tokens": sum(r["input_tokens"] for r in rows),
        "spent via": {r["via"] for r in rows},
        "spent kinds": {r["kind"] for r in rows},
    }


def test_a_plan_predicts_the_requests_and_tokens_its_run_sends(
    prefect_server, store, tmp_path
) -> None:
    """Live and batch re-embeds and a live replay: the plan's requests are the requests the
    fake endpoint receives, its tokens within 2 % of what the fake counts; and what each run
    recorded as spent (``runs show``) is exactly what the fake's answers reported (``usage``),
    request for request, token for token, written by the processes that sent them."""
    from tests.fakes.openai_server import memories as answer_memories

    seen: dict[str, dict[str, int]] = {}
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 16) if "input" in body else answer_memories()
        provider = {"MEMPIPE_LLM_BASE_URL": url, **BATCH_ENV}
        env = environment(prefect_server, **provider)
        for via in ("live", "batch"):
            _, args = copy(store, tmp_path, f"{via}.db")
            move = ["reembed", "--model", MODEL, "--via", via, *args, "--json"]
            plan = json.loads(invoke(*move, "--plan", cwd=tmp_path, env=provider).stdout)
            live_before, lines_before = len(fake.requests), len(fake.batches.lines)
            done = invoke(*move, cwd=tmp_path, env=provider)
            assert done.exit_code == 0, done.stderr
            sent = fake.requests[live_before:] + [
                line["body"] for line in fake.batches.lines[lines_before:]
            ]
            seen[f"reembed {via}"] = {
                "planned requests": plan["requests"],
                "requests": len(sent),
                "planned tokens": plan["input_tokens"],
                "tokens": received_tokens(sent),
                "planned batch files": plan["batch_files"],
                "batches": len(fake.batches.batches),
                **spent(json.loads(done.stdout)["run_id"], args, tmp_path, env),
            }
        _, args = copy(store, tmp_path, "replay.db")
        replay = [
            "replay",
            "--extractor",
            "openai",
            "--force",
            "--user-id",
            "user000",
            *args,
            "--json",
        ]
        plan = json.loads(invoke(*replay, "--plan", cwd=tmp_path, env=provider).stdout)
        before = len(fake.requests)
        done = invoke(*replay, cwd=tmp_path, env=provider)
        assert done.exit_code == 0, done.stderr
        sent = [body for body in fake.requests[before:] if "messages" in body]
        seen["replay live"] = {
            "planned requests": plan["requests"],
            "requests": len(sent),
            "planned tokens": plan["input_tokens"],
            "tokens": received_tokens(sent),
            **spent(json.loads(done.stdout)["run_id"], args, tmp_path, env),
        }
    print(json.dumps(seen, indent=2, default=sorted))
    for job, figures in seen.items():
        assert figures["requests"] == figures["planned requests"], job
        assert abs(figures["tokens"] - figures["planned tokens"]) <= 0.02 * figures["tokens"], job
        assert figures["spent requests"] == figures["requests"], job
        assert figures["spent input tokens"] == figures["tokens"], job
    assert seen["reembed batch"]["spent via"] == {"batch", "live"}, "the lines, and the probe"
    assert seen["reembed live"]["spent via"] == {"live"}
    assert seen["replay live"]["spent kinds"] <= {"extraction", "summary", "judge"}
    assert seen["reembed batch"]["batches"] == seen["reembed batch"]["planned batch files"]


@pytest.mark.process("a real SIGTERM")
def test_a_sigterm_while_batches_run_leaves_them_for_the_next_run(
    prefect_server, store, tmp_path
) -> None:
    db, args = copy(store, tmp_path)
    move = ["reembed", "--model", MODEL, "--collections", "semantic", "--json"]
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 16)
        fake.batches.delay = 3600
        provider = {"MEMPIPE_LLM_BASE_URL": url, **BATCH_ENV}
        env = environment(prefect_server, **provider)
        waiting = start([*move, "--via", "batch", *args], tmp_path, env)
        wait_until_submitted(waiting, db, 2)
        lines = len(fake.batches.lines)
        waiting.send_signal(signal.SIGTERM)
        started = time.monotonic()
        out, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 143, err
        assert time.monotonic() - started < 10
        assert json.loads(out)["kind"] == "interrupted"
        [(status,)] = read(
            db, "SELECT status FROM runs WHERE flow = 'reembed' ORDER BY started_at DESC LIMIT 1"
        )
        assert status == "interrupted"
        assert read(db, "SELECT DISTINCT status FROM provider_batches") == [("submitted",)]

        fake.batches.delay = 0
        rerun = invoke(*move, "--via", "batch", *args, cwd=tmp_path, env=provider)
    assert rerun.exit_code == 0, rerun.stderr
    assert json.loads(rerun.stdout)["switched"] is True
    assert len(fake.batches.lines) == lines, "the rerun applied them and sent nothing again"
