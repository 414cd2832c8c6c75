"""DESIGN rule: no credential leaves the process in clear, and no user text is left where an
erase cannot reach it; looked for everywhere.

Every job runs as a real ``mempipe`` process against a real Prefect server with its own
database, with credentials in the environment (the API key of an OpenAI-compatible endpoint
that checks it, and a store password); then every table of Prefect's database, the store's
bytes on disk, every file mempipe wrote and every line it printed (logs included, ``-v``) are
searched for them. Then the user is erased, as a data request is handled, and the same places
are searched for the user's texts."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import Answer, embeddings, error, fake_openai, memories
from tests.helpers import MARK, USER, read, write_marked_archive
from tests.leaks import hits_in_database, hits_in_files, hits_in_text
from tests.processes import environment, run

pytestmark = pytest.mark.prefect


def respond(body: dict[str, Any]) -> Answer:
    if "input" in body:
        return embeddings(body, 64)
    said = json.dumps(body["messages"])
    if MARK in said:
        return memories({"text": f"User's locker code is {MARK}.", "label": "locker_code"})
    return memories({"text": "User prefers aisle seats.", "label": "seat"})


@pytest.mark.process("every line real commands print, with -v, and a real server's database")
def test_no_credential_reaches_prefect_the_store_files_or_output_and_an_erase_leaves_no_text(
    ops_env,
    tmp_path,
) -> None:
    key, password = f"sk-test-{secrets.token_hex(12)}", f"pw-{secrets.token_hex(12)}"
    home = Path(ops_env["PREFECT_HOME"])
    texts = write_marked_archive(tmp_path / "archive.jsonl")
    (tmp_path / "project-config.yaml").write_text(
        "org_id: acme\nproject_id: travel\nmemory:\n  extraction:\n    enabled: [semantic]\n"
        "  embedding:\n    model: openai:fake-embed:64\n"
    )
    mem0 = tmp_path / "mem0.json"
    mem0.write_text(
        json.dumps({"results": [{"id": "m1", "memory": f"{MARK} is the locker code."}]})
    )
    store, copy, imported = (f"sqlite:///{tmp_path / name}" for name in ("m.db", "c.db", "i.db"))
    outputs: list[str] = []

    def mempipe(*args: str, expect: int = 0, env: dict[str, str]) -> subprocess.CompletedProcess:
        done = run(["-v", *args], tmp_path, env)
        outputs.append(f"$ mempipe {' '.join(args)}\n{done.stdout}\n{done.stderr}")
        assert done.returncode == expect, outputs[-1]
        return done

    with fake_openai() as (fake, url):
        fake.responder = respond
        env = environment(
            ops_env["PREFECT_API_URL"],
            PREFECT_HOME=str(home),
            MEMPIPE_STORE=store,
            MEMPIPE_LLM_BASE_URL=url,
            MEMPIPE_LLM_API_KEY=key,
            MEMPIPE_STORE_PASSWORD=password,
            MEMPIPE_RETRY_MAX_ATTEMPTS="1",
        )
        mempipe(
            "backfill",
            "archive.jsonl",
            "--user-id",
            USER,
            "--identity",
            "record",
            "--json",
            env=env,
        )
        mempipe("promote", env=env)
        mempipe("replay", "--extractor", "openai", "--audit-dir", "audit", "--json", env=env)
        mempipe("reembed", "--incremental", env=env)
        mempipe("import", "--format", "mem0", str(mem0), "--user-id", USER, env=env)
        mempipe("report", "--out", "report", "--html", "page.html", env=env)
        mempipe("search", "locker code", "--user-id", USER, "--json", env=env)
        mempipe("export", "--out", "bundle", env=env)
        mempipe("import", "--format", "bundle", "bundle", "--store", imported, env=env)
        mempipe("copy", "--to", copy, env=env)
        for command in ("stats", "runs", "recover", "migrate", "rebuild-indexes", "models"):
            mempipe(command, "--json", env=env)
        fake.responder = lambda body: error(401, f"Incorrect API key provided: {key}.")
        mempipe("replay", "--extractor", "openai", "--force", "--json", expect=1, env=env)

    assert fake.authorizations, "the provider was called"
    assert set(fake.authorizations) == {f"Bearer {key}"}, "every call carried the key"
    assert read(tmp_path / "m.db", "SELECT count(*) FROM failures")[0][0] > 0, (
        "the rejected key was recorded as a failure"
    )
    credentials = [key, password]
    everywhere = [
        *hits_in_database(home / "prefect.db", credentials),
        *hits_in_files(tmp_path, credentials),
        *hits_in_files(home, credentials),
        *(hit for text in outputs for hit in hits_in_text("output", text, credentials)),
    ]
    assert everywhere == []

    stored = [text for (text,) in read(tmp_path / "m.db", "SELECT text FROM memories_semantic")]
    assert any(MARK in text for text in stored), "the user's memories were there to erase"
    before = hits_in_files(tmp_path, [MARK])
    assert any(hit.startswith("page.html") for hit in before)
    assert any(hit.startswith("report") for hit in before)

    first = mempipe("erase", "--user-id", USER, "--yes", "--json", expect=1, env=env)
    left = [f["path"] for f in json.loads(first.stdout)["files"] if f["left"]]
    assert left == [str(tmp_path / "bundle")], "the bundle is named, as a copy of the store"
    shutil.rmtree(tmp_path / "bundle")
    for other in (copy, imported):
        mempipe("erase", "--user-id", USER, "--yes", "--store", other, env=env)
    mempipe("erase", "--user-id", USER, "--yes", "--audit-dir", "audit", env=env)

    inputs = [tmp_path / "archive.jsonl", mem0]
    assert hits_in_files(tmp_path, [MARK, *texts], skip=inputs) == []
    assert hits_in_database(home / "prefect.db", [MARK, *texts]) == []
    assert hits_in_files(home, [MARK, *texts]) == []
    assert read(tmp_path / "m.db", "SELECT count(*) FROM turns WHERE user_id = 'ann'") == [(1,)]
