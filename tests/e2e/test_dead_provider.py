"""A dead provider on an ops day (issue 38): a revoked key that the endpoint echoes back in its
401, and an endpoint that stops answering. Real ``mempipe`` processes, the real ``openai``
client, a real Prefect server.

- Every job that calls a provider (backfill's embedding, re-embed to a model and incremental,
  replay, an import, a batch re-embed) exits 1 within seconds of a 401, sends no retry of it,
  and the key is nowhere: not in the store file, not in Prefect's database (states, logs,
  events), not in any file under the folder or Prefect's home, not in any line printed (``-v``).
- A replay whose provider hangs after a few answers stops sending once the breaker opens, exits
  1 in seconds rather than a timeout per snapshot, leaves every unfinished extraction retryable,
  and a rerun against a healthy endpoint ends as an uninterrupted run does.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import Answer, embeddings, error, fake_openai, memories
from tests.helpers import invoke, read
from tests.leaks import hits_in_database, hits_in_files, hits_in_text
from tests.processes import environment, run

pytestmark = pytest.mark.prefect

SESSIONS = 80
QUICK = 30.0
"""Seconds within which a job meeting a dead provider has exited (the breaker, not timeouts)."""


def write_archive(path: Path, sessions: int = SESSIONS) -> None:
    lines = [
        {
            "session_id": f"s{s}",
            "turn_seq": t,
            "role": "user",
            "content": f"I prefer window seats on flight {s}. My home airport is {s % 7}.",
            "created_at": f"2024-01-{1 + s // 100:02d}T{(s % 100) // 60:02d}:{s % 60:02d}:0{t}Z",
        }
        for s in range(sessions)
        for t in range(2)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def write_config(folder: Path, model: str) -> None:
    (folder / "project-config.yaml").write_text(
        "org_id: acme\nproject_id: travel\nmemory:\n  extraction:\n    enabled: [semantic]\n"
        f"  embedding:\n    model: {model}\n"
    )


def healthy(body: dict[str, Any]) -> Answer:
    if "input" in body:
        return embeddings(body, 64)
    return memories({"text": "User prefers window seats.", "label": "seat"})


@pytest.mark.process("every line real commands print, with -v, and a real server's database")
def test_a_revoked_key_stops_every_job_at_once_and_is_echoed_nowhere(
    ops_env,
    tmp_path,
) -> None:
    key = f"sk-test-{secrets.token_hex(12)}"
    home = Path(ops_env["PREFECT_HOME"])
    write_archive(tmp_path / "archive.jsonl", sessions=40)
    write_config(tmp_path, "openai:fake-embed:64")
    (tmp_path / "mem0.json").write_text(
        json.dumps({"results": [{"id": "m1", "memory": "Prefers window seats."}]})
    )
    outputs: list[str] = []
    with fake_openai() as (fake, url):
        env = environment(
            ops_env["PREFECT_API_URL"],
            PREFECT_HOME=str(home),
            MEMPIPE_LLM_BASE_URL=url,
            MEMPIPE_LLM_API_KEY=key,
            MEMPIPE_RETRY_MAX_ATTEMPTS="4",
        )

        def mempipe(*args: str, expect: int = 1) -> float:
            started = time.monotonic()
            done = run(["-v", *args], tmp_path, env)
            took = time.monotonic() - started
            outputs.append(f"$ mempipe {' '.join(args)}\n{done.stdout}\n{done.stderr}")
            assert done.returncode == expect, outputs[-1]
            return took

        fake.responder = lambda body: error(401, f"Incorrect API key provided: {key}.")
        for job in (
            ("backfill", "archive.jsonl", "--user-id", "zoe", "--embed"),
            ("reembed", "--incremental"),
            ("reembed", "--model", "openai:fake-other:64"),
            ("replay", "--extractor", "openai"),
            ("import", "--format", "mem0", "mem0.json", "--user-id", "zoe"),
            ("reembed", "--model", "openai:fake-other:64", "--via", "batch"),
        ):
            sent = len(fake.requests)
            took = mempipe(*job, "--json")
            assert took < QUICK, f"{job} took {took:.0f} s against a revoked key"
            retried = len(fake.requests) - sent
            assert retried <= 4, f"{job} sent {retried} requests with a key rejected at the first"

    assert fake.authorizations, "the provider was called"
    everywhere = [
        *hits_in_database(home / "prefect.db", [key]),
        *hits_in_files(tmp_path, [key]),
        *hits_in_files(home, [key]),
        *(hit for text in outputs for hit in hits_in_text("output", text, [key])),
    ]
    assert everywhere == []
    errors = [e for (e,) in read(tmp_path / "mempipe.db", "SELECT error FROM runs") if e]
    assert any("***" in e for e in errors), "the runs record the provider's message, scrubbed"


def test_a_hung_provider_stops_a_replay_in_seconds_and_a_rerun_completes_it(
    prefect_server,
    tmp_path,
) -> None:
    write_archive(tmp_path / "archive.jsonl")
    write_config(tmp_path, "hashing-64")
    answered = itertools.count()

    def hangs_after_ten(body: dict[str, Any]) -> Answer:
        if next(answered) >= 10:
            return Answer(status=500, body={}, delay=20)
        return healthy(body)

    with fake_openai() as (fake, url):
        env = {
            "MEMPIPE_LLM_BASE_URL": url,
            "MEMPIPE_LLM_API_KEY": "sk-test",
            "MEMPIPE_LLM_TIMEOUT_SECONDS": "1",
            "MEMPIPE_RETRY_MAX_ATTEMPTS": "2",
        }
        assert invoke("backfill", "archive.jsonl", cwd=tmp_path, env=env).exit_code == 0
        copy = tmp_path / "uninterrupted"
        copy.mkdir()
        for name in ("archive.jsonl", "project-config.yaml"):
            (copy / name).write_bytes((tmp_path / name).read_bytes())
        assert invoke("backfill", "archive.jsonl", cwd=copy, env=env).exit_code == 0

        fake.responder = hangs_after_ten
        started = time.monotonic()
        hung = invoke("replay", "--extractor", "openai", "--json", cwd=tmp_path, env=env)
        took = time.monotonic() - started
        assert hung.exit_code == 1, hung.output
        assert took < 60, f"a hung provider held the replay {took:.0f} s"
        assert len(fake.requests) < 40, "the breaker stopped the sending, not each snapshot"
        assert "nothing more is sent to" in hung.stderr
        states = dict(
            read(
                tmp_path / "mempipe.db",
                "SELECT status, count(*) FROM snapshot_extractions GROUP BY status",
            )
        )
        assert set(states) <= {"done", "failed_retryable"}, states
        assert states["failed_retryable"] >= SESSIONS - 10

        fake.responder = healthy
        rerun = invoke("replay", "--extractor", "openai", "--json", cwd=tmp_path, env=env)
        assert rerun.exit_code == 0, rerun.output
        clean = invoke("replay", "--extractor", "openai", "--json", cwd=copy, env=env)
        assert clean.exit_code == 0, clean.output

    query = "SELECT text, status, reinforcement_count FROM memories_semantic ORDER BY text, status"
    assert read(tmp_path / "mempipe.db", query) == read(copy / "mempipe.db", query)
    done = "SELECT status, count(*) FROM snapshot_extractions GROUP BY status"
    assert (
        read(tmp_path / "mempipe.db", done)
        == read(copy / "mempipe.db", done)
        == [("done", SESSIONS)]
    )


@pytest.mark.process("the processes of a Dask cluster beside the command's")
def test_a_replay_on_dask_stops_a_hung_provider_after_as_many_requests_as_one_on_threads(
    ops_env,
    tmp_path,
) -> None:
    """Issue 54, with the processes of a Dask cluster (the process boundary is the behaviour):
    the breaker the run's processes share counts their failures together, so a replay on four
    Dask workers sends about as many requests to a provider that hangs after three answers as
    the same replay on four threads, and ends as soon."""
    home = Path(ops_env["PREFECT_HOME"])
    write_archive(tmp_path / "archive.jsonl")
    write_config(tmp_path, "hashing-64")
    sent: dict[str, tuple[int, float]] = {}
    with fake_openai() as (fake, url):
        env = environment(
            ops_env["PREFECT_API_URL"],
            PREFECT_HOME=str(home),
            MEMPIPE_LLM_BASE_URL=url,
            MEMPIPE_LLM_API_KEY="sk-test",
            MEMPIPE_LLM_TIMEOUT_SECONDS="2",
            MEMPIPE_RETRY_MAX_ATTEMPTS="1",
        )
        for runner in ("threads", "dask"):
            folder = tmp_path / runner
            folder.mkdir()
            for name in ("archive.jsonl", "project-config.yaml"):
                (folder / name).write_bytes((tmp_path / name).read_bytes())
            fake.responder = healthy
            assert run(["backfill", "archive.jsonl"], folder, env).returncode == 0
            answered = itertools.count()

            def hangs_after_three(body: dict[str, Any], answered=answered) -> Answer:
                if next(answered) >= 3:
                    return Answer(status=500, body={}, delay=10)
                return healthy(body)

            fake.responder = hangs_after_three
            before = len(fake.requests)
            started = time.monotonic()
            replay = ["replay", "--extractor", "openai", "--concurrency", "4", "--json"]
            hung = run([*replay, "--task-runner", runner], folder, env)
            sent[runner] = (len(fake.requests) - before, time.monotonic() - started)
            assert hung.returncode == 1, hung.stderr
            assert "nothing more is sent to" in hung.stderr
    print(f"requests sent, seconds: {sent}")
    (threads, _), (dask, _) = sent["threads"], sent["dask"]
    assert dask <= threads + 4, f"dask sent {dask}, threads {threads}: one wave more at most"
