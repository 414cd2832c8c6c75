"""Every hint runs (issue 54): a command an ``error:`` line suggests, followed as written, gets
past that error. ``HINTS`` names the test that walks each hint the code can print in an error
(the first test below finds them all in the source, so a new one cannot go unwalked); each walk
makes the error, reads the hint off the line, runs it as written, and runs what failed again.
In this process (``CliRunner``) but where the hint is another program's command or the session
server's, whose walks are the tests named."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mempipe.adapters.store import open_store
from mempipe.cli import cli
from mempipe.errors import StoreError
from tests.fakes.openai_server import Answer, embeddings, error, fake_openai, memories
from tests.processes import prefect

ROOT = Path(__file__).parents[2]
SAMPLE = ROOT / "examples" / "sample-archive"
MEM0 = ROOT / "examples" / "mem0-get-all.json"
HERE = "tests/integration/test_hints.py"

HINTS: dict[str, list[str]] = {
    "mempipe init": [f"{HERE}::test_init_makes_the_store_a_command_was_refused_for"],
    "mempipe users": [f"{HERE}::test_users_lists_the_ids_an_erase_can_name"],
    "mempipe runs": [
        f"{HERE}::test_runs_lists_the_run_ids_runs_show_takes",
        f"{HERE}::test_runs_shows_the_live_run_holding_a_lock_and_the_job_goes_once_it_ends",
    ],
    "mempipe migrate": [f"{HERE}::test_migrate_applies_what_a_read_needs"],
    "mempipe rebuild-indexes --force": [
        f"{HERE}::test_rebuild_indexes_force_covers_a_partition_key_declared_after_the_index",
        f"{HERE}::test_rebuild_indexes_after_a_search_index_that_was_slow_to_serve",
    ],
    "mempipe reembed --incremental": [
        f"{HERE}::test_reembed_incremental_gives_turns_the_vectors_a_search_by_meaning_needs",
        f"{HERE}::test_reembed_incremental_embeds_what_a_failing_provider_left",
    ],
    "mempipe reembed --model {}": [f"{HERE}::test_reembed_to_a_model_lets_its_vectors_in"],
    "mempipe replay": [f"{HERE}::test_replay_again_retries_what_failed_retryably"],
    "mempipe report --run-id {}": [f"{HERE}::test_report_of_the_run_names_its_failed_extractions"],
    "prefect gcl create {} --limit {} --slot-decay-per-second {}": [
        f"{HERE}::test_the_rate_limit_named_is_made_as_the_error_says"
    ],
    "mempipe import {} --format bundle": [
        f"{HERE}::test_a_bundle_given_to_the_memory_import_is_imported_as_said"
    ],
    "mempipe rebuild-indexes": [
        f"{HERE}::test_rebuild_indexes_force_covers_a_partition_key_declared_after_the_index",
    ],
    "mempipe stats --check": [
        "tests/e2e/test_corrupt_store.py::test_a_backfill_into_a_damaged_store_is_refused_and_writes_nothing"
    ],
    "mempipe server stop --force": [
        "tests/e2e/test_server_installations.py::test_a_server_is_its_installations_and_is_stopped_in_use_only_with_force"
    ],
}
"""Each hint an error can print (placeholders as ``{}``), and the tests that follow it."""

_SAID = re.compile(r"`((?:mempipe|prefect) [^`]*)`")
_OUTPUT_CALLS = {"echo", "secho", "debug", "info", "warning", "option", "command", "group"}
"""Calls whose text is a command's output or help, not an error: their hints are not listed;
nor are those of the commands' printers (``_show_*``)."""


def error_hints() -> dict[str, list[str]]:
    """Every backticked command in the source's error texts (not docstrings, not output), with
    where it is, placeholders written ``{}``."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "mempipe").rglob("*.py")):
        tree = ast.parse(path.read_text())
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                skip.add(id(node.value))  # docstrings, of modules, classes, functions, names
            called = getattr(node, "func", None)
            name = getattr(called, "attr", getattr(called, "id", ""))
            printer = isinstance(node, ast.FunctionDef) and node.name.startswith("_show")
            if (isinstance(node, ast.Call) and name in _OUTPUT_CALLS) or printer:
                skip.update(id(sub) for sub in ast.walk(node))
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.JoinedStr):
                skip.update(id(part) for part in node.values)
                text = "".join(
                    p.value if isinstance(p, ast.Constant) else "{}" for p in node.values
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            for hint in _SAID.findall(text):
                found.setdefault(re.sub(r"\{[^}]*\}", "{}", hint), []).append(
                    f"{path.relative_to(ROOT)}:{node.lineno}"
                )
    return found


def test_every_hint_an_error_can_print_is_walked_by_a_test() -> None:
    found = error_hints()
    assert set(found) == set(HINTS), f"hints not walked: {set(found) - set(HINTS)}"
    for tests in HINTS.values():
        for test in tests:
            file, name = test.split("::")
            assert f"def {name}(" in (ROOT / file).read_text(), test


def run(*args: str, expect: int = 0) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == expect, f"{args}: {result.output}"
    return result


def hint(result: Result, command: str = "") -> list[str]:
    """The command the failure's one ``error:`` line suggests (of two, the one that starts
    with ``command``), as its words."""
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    (said,) = [h for h in _SAID.findall(line) if h.startswith(command)]
    return shlex.split(said)


def follow(words: list[str], expect: int = 0) -> Result:
    assert words[0] == "mempipe", words
    return run(*words[1:], expect=expect)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("MEMPIPE_LLM_BASE_URL", "MEMPIPE_LLM_API_KEY", "MEMPIPE_LLM_RATE_LIMIT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_init_makes_the_store_a_command_was_refused_for(prefect_server, here) -> None:
    for store in ("sqlite:///typo.db", "sqlite:///srv/mempipe/memory.db"):
        refused = run("replay", "--store", store, expect=1)
        follow([*hint(refused), "--store", store])
        assert "nothing to extract" in run("replay", "--store", store).stdout
    assert (here / "srv" / "mempipe" / "memory.db").is_file(), "init made the folder"
    elsewhere = "sqlite:///var/mempipe/memory.db"
    refused = run("backfill", str(SAMPLE), "--user-id", "maya", "--store", elsewhere, expect=1)
    assert "directory 'var/mempipe' does not exist" in refused.output
    follow([*hint(refused), "--store", elsewhere])
    run("backfill", str(SAMPLE), "--user-id", "maya", "--store", elsewhere)


def test_users_lists_the_ids_an_erase_can_name(prefect_server, here) -> None:
    run("backfill", str(SAMPLE), "--user-id", "maya")
    refused = run("erase", "--user-id", "may", "--dry-run", expect=1)
    listed = follow([*hint(refused), "--json"])
    (user,) = json.loads(listed.stdout)["users"]
    run("erase", "--user-id", user["user_id"], "--dry-run")


def test_runs_lists_the_run_ids_runs_show_takes(prefect_server, here) -> None:
    run("backfill", str(SAMPLE), "--user-id", "maya")
    refused = run("runs", "show", "no-such-run", expect=1)
    listed = json.loads(follow([*hint(refused), "--json"]).stdout)
    run("runs", "show", listed["runs"][0]["run"]["run_id"])


def test_runs_shows_the_live_run_holding_a_lock_and_the_job_goes_once_it_ends(
    prefect_server, here
) -> None:
    from datetime import UTC, datetime, timedelta

    from mempipe.errors import JobBusyError
    from mempipe.flows.reembed import reembed_flow
    from mempipe.schemas.run import RunRecord, RunStatus

    run("backfill", str(SAMPLE), "--user-id", "maya", "--embed")
    store = open_store("sqlite:///mempipe.db", migrate=True)
    import socket

    store.start_run(
        RunRecord(
            run_id="holder",
            flow="reembed",
            status=RunStatus.RUNNING,
            started_at=datetime.now(UTC),
            host=socket.gethostname(),
            pid=os.getpid(),
            heartbeat_at=datetime.now(UTC),
        )
    )
    assert store.acquire_lease("reembed", "holder", timedelta(minutes=10)) is None
    with pytest.raises(JobBusyError) as refused:
        reembed_flow(model="hashing-32", lock_wait_s=0, store="sqlite:///mempipe.db")
    (said,) = _SAID.findall(str(refused.value))
    shown = follow(shlex.split(said))
    assert "holder" in shown.stdout
    assert "reembed" in shown.stdout.split("holder", 1)[1].splitlines()[0], "and its lock"
    store.release_leases("holder", ["reembed"])
    store.finish_run("holder", RunStatus.COMPLETED, {}, None)
    store.close()
    reembed_flow(model="hashing-32", lock_wait_s=0, store="sqlite:///mempipe.db")


def test_migrate_applies_what_a_read_needs(prefect_server, here) -> None:
    run("backfill", str(SAMPLE), "--user-id", "maya")
    import apsw

    last = open_store("sqlite:///mempipe.db").applied_migrations()[-1]
    conn = apsw.Connection("mempipe.db")
    conn.execute("DELETE FROM _migrations WHERE id = ?", (last,))
    conn.close()
    refused = run("stats", expect=1)
    follow(hint(refused))
    run("stats")


def test_rebuild_indexes_force_covers_a_partition_key_declared_after_the_index(
    prefect_server, here
) -> None:
    (here / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    run("backfill", str(SAMPLE), "--user-id", "maya", "--embed")
    (here / "project-config.yaml").write_text(
        "memory:\n  embedding:\n    model: hashing-64\n  metadata_partition_keys: [ticket_id]\n"
    )
    search = ["search", "order", "--source", "stm", "--mode", "semantic"]
    search += ["--metadata", "metadata.ticket_id=T-118"]
    not_recorded = run(*search, expect=1)
    follow(hint(not_recorded))
    not_covered = run(*search, expect=1)
    follow(hint(not_covered))
    assert "My order 4411" in run(*search).stdout


def test_reembed_incremental_gives_turns_the_vectors_a_search_by_meaning_needs(
    prefect_server, here
) -> None:
    run("backfill", str(SAMPLE), "--user-id", "maya")
    search = ["search", "where is my order", "--source", "stm", "--mode", "semantic"]
    refused = run(*search, expect=1)
    follow(hint(refused))
    assert "4411" in run(*search).stdout


def test_reembed_to_a_model_lets_its_vectors_in(prefect_server, here) -> None:
    (here / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    run("backfill", str(SAMPLE), "--user-id", "maya")
    run("replay")
    store = open_store("sqlite:///mempipe.db")
    with pytest.raises(StoreError) as refused:
        store.ensure_vector_table("semantic", "hashing-32", 32)
    store.close()
    (said,) = _SAID.findall(str(refused.value))
    follow(shlex.split(said))
    store = open_store("sqlite:///mempipe.db")
    assert store.ensure_vector_table("semantic", "hashing-32", 32)
    store.close()


@pytest.fixture
def provider(here, monkeypatch):
    """The fake OpenAI endpoint, answering as its ``responder`` says; one attempt a request."""
    with fake_openai() as (fake, url):
        monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", url)
        monkeypatch.setenv("MEMPIPE_LLM_API_KEY", "sk-hints")
        monkeypatch.setenv("MEMPIPE_RETRY_MAX_ATTEMPTS", "1")
        monkeypatch.setenv("MEMPIPE_RETRY_BREAKER_FAILURES", "100")
        yield fake


def airport(body: dict) -> Answer:
    if "input" in body:
        return embeddings(body, 16)
    return memories({"text": "User's home airport is LIS.", "label": "home_airport"})


def test_replay_again_retries_what_failed_retryably(prefect_server, provider) -> None:
    run("backfill", str(SAMPLE), "--user-id", "maya")
    provider.responder = lambda body: error(503, "overloaded")
    refused = run("replay", "--extractor", "openai", "--handlers", "semantic", expect=1)
    provider.responder = airport
    words = hint(refused, "mempipe replay")
    again = follow([*words, "--extractor", "openai", "--handlers", "semantic", "--json"])
    summary = json.loads(again.stdout)
    assert summary["done"] == summary["extractions"] > 0


def test_report_of_the_run_names_its_failed_extractions(prefect_server, provider) -> None:
    run("backfill", str(SAMPLE), "--user-id", "maya")
    provider.responder = lambda body: error(400, "this request is not acceptable")
    refused = run("replay", "--extractor", "openai", "--handlers", "semantic", expect=1)
    shown = follow([*hint(refused, "mempipe report"), "--json"])
    document = json.loads(shown.stdout)
    assert document["failures"]["content"] > 0, "the run's failures, counted by class"


def test_reembed_incremental_embeds_what_a_failing_provider_left(prefect_server, provider) -> None:
    (Path.cwd() / "project-config.yaml").write_text(
        "memory:\n  embedding:\n    model: openai:fake-embed:16\n"
    )
    provider.responder = lambda body: error(503, "overloaded")
    refused = run("import", str(MEM0), "--format", "mem0", expect=1)
    provider.responder = airport
    follow(hint(refused))
    counts = json.loads(run("stats", "--json").stdout)
    assert counts["memories"]["semantic"]["active"] > 0
    assert json.loads(run("reembed", "--incremental", "--json").stdout)["collections"]


def test_the_rate_limit_named_is_made_as_the_error_says(
    prefect_server, provider, monkeypatch
) -> None:
    """The hint is Prefect's own command: run by the ``prefect`` program, against the server."""
    run("backfill", str(SAMPLE), "--user-id", "maya")
    provider.responder = airport
    monkeypatch.setenv("MEMPIPE_LLM_RATE_LIMIT", "hint-limit")
    refused = run("replay", "--extractor", "openai", "--handlers", "semantic", expect=1)
    words = hint(refused)
    assert words[:3] == ["prefect", "gcl", "create"]
    prefect(*words[1:], env={**os.environ, "PREFECT_API_URL": prefect_server}, timeout=120)
    summary = json.loads(
        run("replay", "--extractor", "openai", "--handlers", "semantic", "--json").stdout
    )
    assert summary["done"] == summary["extractions"] > 0


def test_a_bundle_given_to_the_memory_import_is_imported_as_said(prefect_server, here) -> None:
    """A deployment's ``import-memories`` run told ``format=bundle`` (the command refuses it
    before): the error names the command that imports the bundle."""
    from mempipe.errors import IncompleteRunError
    from mempipe.flows.import_ import import_memories_flow

    run("backfill", str(SAMPLE), "--user-id", "maya")
    run("export", "--out", "bundle")
    with pytest.raises(IncompleteRunError) as refused:
        import_memories_flow(paths=[str(here / "bundle")], format="bundle", store="sqlite:///b.db")
    (said,) = set(_SAID.findall(str(refused.value)))
    imported = follow([*shlex.split(said), "--store", "sqlite:///b.db", "--json"])
    assert json.loads(imported.stdout)["digests_match"]


def test_rebuild_indexes_after_a_search_index_that_was_slow_to_serve(
    prefect_server, here, monkeypatch
) -> None:
    """On MongoDB (the strict Atlas fake, its rebuilds slower than the wait): a forced rebuild
    whose index is not queryable in time says so; once it serves, the forced rebuild again
    rebuilds what the first left drifted, and every index serves its declaration."""
    import time

    from mempipe.adapters.store.mongo import factory
    from tests.fakes import atlas

    fake = atlas.client()
    monkeypatch.setattr(factory, "MongoClient", lambda url, **options: fake)
    for name, delay in atlas.STRICT.items():
        monkeypatch.setattr(atlas, name, delay)
    monkeypatch.setenv("MEMPIPE_MONGODB_INDEX_POLL", "0.05")
    store = ["--store", "mongodb://mongomock/hints"]
    run("backfill", str(SAMPLE), "--user-id", "maya", *store)
    (here / "project-config.yaml").write_text("memory:\n  metadata_partition_keys: [ticket_id]\n")
    monkeypatch.setattr(atlas, "UPDATE_DELAY_S", 2.0)
    monkeypatch.setenv("MEMPIPE_MONGODB_INDEX_TIMEOUT", "0.3")
    refused = run("rebuild-indexes", "--force", *store, expect=1)
    time.sleep(2.0)
    monkeypatch.setenv("MEMPIPE_MONGODB_INDEX_TIMEOUT", "10")
    shown = follow([*hint(refused), *store, "--json"])
    assert {s["state"] for s in json.loads(shown.stdout)["indexes"]} <= {"ok", "rebuilt"}
    checked = json.loads(run("rebuild-indexes", *store, "--json").stdout)["indexes"]
    assert {s["state"] for s in checked} == {"ok"}, "every index serves its declaration"
