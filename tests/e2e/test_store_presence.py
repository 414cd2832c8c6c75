"""A typo'd store is an error, never a new empty store: every command that works on a store
refuses one that is not there, naming it and saying how to create one, and leaves nothing behind
(no file, no ``-wal`` / ``-shm``). Only the commands that bring data in, and ``mempipe init``,
create a store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from mempipe.cli import cli
from tests.docs import page
from tests.helpers import invoke
from tests.processes import environment, run

ROOT = Path(__file__).parents[2]

NEEDS_A_STORE: dict[str, tuple[str, ...]] = {
    "migrate": ("migrate",),
    "promote": ("promote",),
    "replay": ("replay",),
    "report": ("report",),
    "search": ("search", "window seat"),
    "reembed": ("reembed", "--model", "hashing-64"),
    "reembed finalize": ("reembed", "finalize"),
    "reembed rollback": ("reembed", "rollback"),
    "reembed bridge": ("reembed", "bridge", "--model", "hashing-64"),
    "models": ("models",),
    "eval": ("eval", "queries.jsonl"),
    "rebuild-indexes": ("rebuild-indexes",),
    "stats": ("stats",),
    "runs": ("runs",),
    "runs show": ("runs", "show", "0b9d2c1e-0000-4000-8000-000000000000"),
    "runs cancel": ("runs", "cancel", "0b9d2c1e-0000-4000-8000-000000000000"),
    "recover": ("recover",),
    "export": ("export", "--out", "bundle"),
    "erase": ("erase", "--user-id", "maya"),
    "forget": ("forget",),
    "copy": ("copy", "--to", "sqlite:///copy.db"),
    "users": ("users",),
}
CREATES_A_STORE = ("init", "backfill", "import", "copy --to")
NO_STORE = ("server status", "server start", "server stop")
SHOWN_ERROR = next(
    line
    for line in page("stores/index.md").splitlines()
    if line.startswith("error: 'sqlite:///typo.db': no store at")
)


def command_paths() -> set[str]:
    paths = set()
    for name, command in cli.commands.items():
        paths.add(name)
        paths.update(f"{name} {sub}" for sub in getattr(command, "commands", {}))
    return paths


def test_every_command_is_listed_as_needing_or_creating_a_store() -> None:
    listed = {*NEEDS_A_STORE, *(c.split(" --")[0] for c in CREATES_A_STORE), *NO_STORE}
    assert command_paths() <= listed | {"server"}, command_paths() - listed
    assert command_paths() >= listed


def refused_and_nothing_created(stdout: str, stderr: str, created: list[str]) -> None:
    document = json.loads(stdout)
    assert document["kind"] == "store", "the failure kind the troubleshooting page lists"
    error = document["error"]
    assert "no store at 'typo.db'" in error
    assert stderr.strip() == SHOWN_ERROR, "the stores page shows the error as it is"
    assert "`mempipe init` creates" in error
    assert stderr.startswith("error: ")
    assert "Traceback" not in stderr
    assert created == [], "nothing was created"


@pytest.mark.parametrize("name", sorted(NEEDS_A_STORE))
def test_a_command_that_needs_a_store_refuses_a_missing_one_and_creates_nothing(
    name, tmp_path, monkeypatch
) -> None:
    """Each command, in this process (the refusal comes before any flow or server); the one
    below is the same refusal in a process of its own, as a user meets it."""
    (tmp_path / "queries.jsonl").write_text('{"query": "seat", "relevant_ids": ["t1"]}\n')
    before = set(tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        cli, [*NEEDS_A_STORE[name], "--store", "sqlite:///typo.db", "--json"]
    )
    assert result.exit_code == 1, result.output
    refused_and_nothing_created(
        result.stdout, result.stderr, sorted(p.name for p in set(tmp_path.iterdir()) - before)
    )


@pytest.mark.process("the in-process refusals' twin: a real command, before any Prefect server")
def test_a_missing_store_is_refused_by_a_commands_own_process(tmp_path) -> None:
    result = run(["replay", "--store", "sqlite:///typo.db", "--json"], tmp_path, environment(None))
    assert result.returncode == 1, result.stdout + result.stderr
    refused_and_nothing_created(result.stdout, result.stderr, sorted(os.listdir(tmp_path)))


@pytest.mark.prefect
def test_the_commands_that_bring_data_in_create_their_store(prefect_server, tmp_path) -> None:
    def ran(*args: str) -> dict:
        result = invoke(*args, "--json", cwd=tmp_path)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    ran("init", "--store", "sqlite:///init.db")
    sample = ROOT / "examples" / "sample-archive"
    ran("backfill", str(sample), "--user-id", "maya", "--store", "sqlite:///backfill.db")
    ran("copy", "--store", "sqlite:///backfill.db", "--to", "sqlite:///copy.db")
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    mem0 = ROOT / "examples" / "mem0-get-all.json"
    ran("import", str(mem0), "--format", "mem0", "--store", "sqlite:///import.db")
    for name in ("init", "backfill", "copy", "import"):
        stats = ran("stats", "--store", f"sqlite:///{name}.db")
        assert stats["store"].endswith(f"{name}.db")
    assert ran("stats", "--store", "sqlite:///copy.db")["turns"] == 20


def test_a_missing_store_in_a_missing_directory_is_named(tmp_path: Path) -> None:
    result = invoke("promote", "--store", "sqlite:///no/such/dir/m.db", cwd=tmp_path)
    assert result.exit_code == 1
    assert "no store at 'no/such/dir/m.db'" in result.stderr
    assert not (tmp_path / "no").exists()
