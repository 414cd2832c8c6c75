"""Identity is explicit (issue 54): an id the operator names on a command is never silently
replaced by one an archive carries (a conflict is a reject naming both, unless ``--identity``
chose a policy), every backfill and import summary names the users it wrote, ``mempipe users``
lists a store's users, and an erase of an id the store does not hold is refused, naming the
nearest it does. Through the commands, in this process, on a real store and Prefect."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mempipe.cli import cli

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
MEM0 = ROOT / "examples" / "mem0-get-all.json"


@pytest.fixture
def exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ChatGPT export and a Claude export, the Claude one carrying its account's id."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "exports"
    folder.mkdir()
    shutil.copy(FIXTURES / "chatgpt_conversations.json", folder)
    claude = json.loads((FIXTURES / "claude_conversations.json").read_text())
    for conversation in claude:
        conversation["account"] = {"uuid": "acct-jonas-0001"}
    (folder / "claude_conversations.json").write_text(json.dumps(claude))
    return folder


def run(*args: str) -> dict:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def users_of(document: dict) -> dict[str | None, int]:
    return {u["user_id"]: u["records"] for u in document["users"]}


def test_an_explicit_user_id_is_never_replaced_and_the_erase_reaches_every_turn(
    prefect_server, exports
) -> None:
    summary = run("backfill", str(exports), "--user-id", "jonas")
    assert users_of(summary) == {"jonas": summary["turns_inserted"]}
    assert summary["identity_conflicts"] == summary["rejected"] == 4
    rejects = [json.loads(line) for line in Path(summary["rejects_path"]).read_text().splitlines()]
    assert all("'acct-jonas-0001'" in r["reason"] and "'jonas'" in r["reason"] for r in rejects), (
        "each reject names both ids"
    )
    listed = run("users")
    assert [(u["user_id"], u["turns"]) for u in listed["users"]] == [
        ("jonas", summary["turns_inserted"])
    ]
    would = run("erase", "--user-id", "jonas", "--dry-run")
    assert would["counts"]["turns"] == summary["turns_inserted"], "every turn stored under jonas"


def test_identity_record_keeps_the_records_own_and_the_summary_names_both(
    prefect_server, exports
) -> None:
    summary = run("backfill", str(exports), "--user-id", "jonas", "--identity", "record")
    assert summary["rejected"] == 0
    assert users_of(summary) == {"jonas": 8, "acct-jonas-0001": 4}
    human = CliRunner().invoke(cli, ["users"])
    assert "acct-jonas-0001" in human.stdout
    assert "2 user(s)" in human.stdout


def test_identity_command_writes_the_named_id_over_the_records(prefect_server, exports) -> None:
    summary = run("backfill", str(exports), "--user-id", "jonas", "--identity", "command")
    assert (summary["rejected"], users_of(summary)) == (0, {"jonas": 12})


def test_a_memory_import_names_its_users_and_rejects_another_users_memory(
    prefect_server, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    summary = run("import", str(MEM0), "--format", "mem0", "--user-id", "alice")
    assert users_of(summary) == {"alice": 3}
    assert summary["rejected"] == 2, "a memory that is a number, and bob's, which is not alice's"
    rejects = Path(summary["rejects_path"]).read_text().splitlines()
    (conflict,) = [json.loads(r) for r in rejects if json.loads(r)["identity_conflict"]]
    assert "'bob'" in conflict["reason"]
    assert "'alice'" in conflict["reason"]


def test_an_erase_of_an_id_the_store_does_not_hold_fails_naming_the_nearest(
    prefect_server, exports
) -> None:
    run("backfill", str(exports), "--user-id", "jonas", "--identity", "record")
    for args in (["--yes"], ["--dry-run"]):
        result = CliRunner().invoke(cli, ["erase", "--user-id", "jnas", *args])
        assert result.exit_code == 1
        (line,) = result.stderr.splitlines()
        assert line.startswith("error: no user 'jnas'")
        assert "nearest it holds: jonas, acct-jonas-0001" in line
    assert run("users")["users"][0]["turns"] == 4, "nothing was erased"


def test_an_erase_run_again_counts_only_what_it_changed(prefect_server, exports) -> None:
    """The second erase of the same user finds it erased (the fence), so it runs, and counts
    nothing: its audit rows were redacted by the first."""
    run("backfill", str(exports), "--user-id", "jonas")
    run("replay")
    first = run("erase", "--user-id", "jonas", "--yes")
    assert first["counts"]["turns"] == 8
    assert first["counts"]["audit_redacted"] > 0
    again = run("erase", "--user-id", "jonas", "--yes")
    assert {k: n for k, n in again["counts"].items() if n} == {}
    assert run("users")["erased"] == [{"org_id": None, "project_id": None, "user_id": "jonas"}]


def test_a_bundle_import_takes_no_identity_it_would_not_apply(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bundle").mkdir()
    result = CliRunner().invoke(
        cli, ["import", "bundle", "--format", "bundle", "--user-id", "jonas"]
    )
    assert result.exit_code == 2
    assert "--user-id do(es) not apply" in result.stderr
