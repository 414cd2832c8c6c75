"""One failure contract: every failure is one ``error:`` line on stderr and exit 1, and with
``--json`` one JSON document ``{"error", "kind"}`` on stdout; read-only commands never write."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import invoke
from tests.processes import environment, run


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_failed(result, kind: str) -> dict:
    assert result.exit_code == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    document = json.loads(result.stdout)
    assert document["kind"] == kind
    assert document["error"] == errors[0].removeprefix("error: ")
    return document


def test_stats_on_a_foreign_sqlite_file_leaves_it_untouched(tmp_path) -> None:
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO orders (total) VALUES (9.5)")
    before = digest(foreign)

    result = invoke("stats", "--store", f"sqlite:///{foreign}", "--json", cwd=tmp_path)

    assert "not a mempipe store" in assert_failed(result, "store")["error"]
    assert digest(foreign) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"], "no -wal / -shm left"


def test_a_backfill_of_a_missing_path_creates_no_store(tmp_path) -> None:
    result = invoke(
        "backfill", "nowhere/", "--store", "sqlite:///memory.db", "--json", cwd=tmp_path
    )
    assert "no such file or directory" in assert_failed(result, "archive")["error"]
    assert not (tmp_path / "memory.db").exists()


def test_a_writing_command_refuses_another_applications_database(tmp_path, fixtures) -> None:
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    before = digest(foreign)
    result = invoke("init", "--store", f"sqlite:///{foreign}", "--json", cwd=tmp_path)
    assert "another application's tables" in assert_failed(result, "store")["error"]
    migrated = invoke("migrate", "--store", f"sqlite:///{foreign}", "--json", cwd=tmp_path)
    assert "is not a mempipe store" in assert_failed(migrated, "store")["error"]
    assert digest(foreign) == before


@pytest.mark.parametrize("model", ["hashing-0", "openai:text-embedding-3-small:0", "no-such-model"])
def test_an_unusable_model_is_refused_before_anything_runs(tmp_path, model) -> None:
    created = invoke("init", "--store", "sqlite:///memory.db", cwd=tmp_path)
    assert created.exit_code == 0, created.stderr
    result = invoke(
        "reembed", "--model", model, "--store", "sqlite:///memory.db", "--json", cwd=tmp_path
    )
    assert "unknown embedding model" in assert_failed(result, "config")["error"]


@pytest.mark.prefect
@pytest.mark.process("Prefect's logs of the run on a real command's stderr, with -v")
def test_a_run_that_fails_inside_its_flow_says_so_in_one_line(prefect_server, tmp_path) -> None:
    """The terminal gets the command's one ``error:`` line; with -v the run's logs too, ending
    in the run's own line, with no traceback for a failure mempipe said on purpose."""
    sample = Path(__file__).parents[2] / "examples" / "sample-archive"
    store = ("--store", "sqlite:///memory.db")

    assert invoke("backfill", str(sample), "--user-id", "maya", *store, cwd=tmp_path).exit_code == 0
    assert (
        invoke("export", "--out", "bundle", "--user-id", "maya", *store, cwd=tmp_path).exit_code
        == 0
    )
    erased = invoke("erase", "--user-id", "maya", "--yes", "--json", *store, cwd=tmp_path)
    assert "still in 1 file(s)" in assert_failed(erased, "incomplete")["error"]
    verbose = run(
        ["-v", "erase", "--user-id", "maya", "--yes", *store], tmp_path, environment(prefect_server)
    )
    assert verbose.returncode == 1
    assert "Beginning flow run" in verbose.stderr, "-v shows the run's logs"
    assert "| ERROR   | Flow run" in verbose.stderr, "the run's own error line among them"
    assert "Traceback" not in verbose.stderr


@pytest.mark.prefect
def test_unreadable_archives_say_why_on_stderr_with_no_bar_no_blank_line_and_no_false_hint(
    prefect_server, tmp_path
) -> None:
    """Four archives that cannot be read beside a good one: the error names the first three
    with their reasons and counts the rest; a redirected stderr gets no bar and no blank line;
    a run that inserted nothing suggests nothing about its turns."""
    import gzip

    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(b'{"a": 1}\n' * 500)[:-40])
    (tmp_path / "foreign.json").write_text('{"orders": [1, 2]}')
    (tmp_path / "blob.jsonl").write_bytes(bytes(range(256)) * 8)
    result = invoke(
        "backfill", "deep.json", "cut.jsonl.gz", "foreign.json", "blob.jsonl", cwd=tmp_path
    )
    assert result.exit_code == 1
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert error.startswith("error: 4 file(s) could not be read to the end: ")
    assert "MEMPIPE_ARCHIVE_MAX_DEPTH" in error
    assert "and 1 more" in error
    assert "" not in result.stderr.splitlines(), "no blank line"
    assert "━" not in result.stderr, "no bar on a redirected stderr"
    failed = [line for line in result.stdout.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 4
    assert all(": " in line.removeprefix("failed: ") for line in failed), "each with its reason"
    assert "reembed --incremental" not in result.stdout, "no hint about turns never inserted"

    replay = invoke("replay", cwd=tmp_path)
    assert replay.exit_code == 0, replay.stderr
    assert "nothing to extract" in replay.stdout
    assert "A backfill brings conversations in first" in replay.stdout
    assert "mempipe report" not in replay.stdout


@pytest.mark.parametrize("command", [("stats",), ("backfill", "a.jsonl")])
def test_an_unreachable_mongodb_is_said_within_its_timeout_before_prefect_starts(
    tmp_path, command
) -> None:
    import time

    (tmp_path / "a.jsonl").write_text('{"session_id": "s", "role": "user", "content": "hi"}\n')
    env = {"PREFECT_HOME": str(tmp_path / "prefect"), "MEMPIPE_MONGODB_TIMEOUT_SECONDS": "2"}
    started = time.monotonic()
    done = invoke(*command, "--store", "mongodb://127.0.0.1:9/mp", cwd=tmp_path, env=env)
    took = time.monotonic() - started
    assert done.exit_code == 1
    assert "MongoDB is unreachable" in done.stderr
    assert took < 2 + 15, (
        f"{took:.1f} s: the 2 s timeout and the command's start (slow on a loaded machine), "
        "not pymongo's default 30 s"
    )
    assert not (tmp_path / "prefect" / "mempipe-server.json").exists(), "no Prefect started"
