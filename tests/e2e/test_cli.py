"""The CLI as users and scripts call it: JSON on stdout, logs on stderr; in this process
(click's runner) but where the process is the behaviour (the stdout/stderr split of a real
command, a terminal's bars, Prefect's logs with -v, a fresh interpreter's settings)."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from mempipe.cli import cli
from mempipe.migrations import all_migrations
from tests.docs import page
from tests.helpers import invoke
from tests.processes import MEMPIPE, environment, python, run, shell

ROOT = Path(__file__).parents[2]


@pytest.mark.prefect
@pytest.mark.process("a real command's stdout and stderr, apart")
def test_backfill_json_is_one_document_on_stdout_and_a_rerun_adds_nothing(
    prefect_server, fixtures, tmp_path
) -> None:
    args = ["backfill", str(fixtures), "--store", "sqlite:///memory.db", "--json"]
    first = run(args, tmp_path, environment(prefect_server))
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    for key in (
        "run_id",
        "turns_inserted",
        "duplicates_skipped",
        "rejected",
        "rejects_path",
        "sessions",
        "snapshots_created",
    ):
        assert key in summary
    assert summary["turns_inserted"] == 34
    assert "promote sessions" not in first.stderr, "no bar on a redirected stderr"

    second = invoke(*args, cwd=tmp_path)
    assert json.loads(second.stdout)["duplicates_skipped"] == 34
    assert json.loads(second.stdout)["turns_inserted"] == 0

    stats = invoke("stats", "--store", "sqlite:///memory.db", "--json", cwd=tmp_path)
    counts = json.loads(stats.stdout)
    assert (counts["turns"], counts["sessions"], counts["snapshots"]["pending"]) == (34, 12, 13)
    assert counts["memories"]["semantic"] == {"active": 0, "superseded": 0}
    assert counts["failures"] == {"environmental": 0, "content": 0}
    assert counts["runs"] == {"completed": 2}


@pytest.mark.prefect
@pytest.mark.process("a terminal's bars, on script's pseudo-terminal")
def test_progress_bars_are_drawn_on_a_terminal(prefect_server, fixtures, tmp_path) -> None:
    """On a terminal (here ``script``'s pseudo-terminal) a long step draws its bar on stderr;
    redirected, it draws none (above)."""
    command = shlex.join([*MEMPIPE, "backfill", str(fixtures), "--store", "sqlite:///t.db"])
    env = environment(prefect_server, COLUMNS="120")
    shown = shell(f"script -qec {shlex.quote(command)} /dev/null", tmp_path, env)
    assert shown.returncode == 0, shown.stdout
    assert "promote sessions" in shown.stdout, "the terminal shows the bar"
    assert "34/34 turns" in shown.stdout


def test_init_creates_the_store_and_migrate_is_idempotent_on_it(tmp_path) -> None:
    every = [m.id for m in all_migrations()]
    first = invoke("init", "--json", cwd=tmp_path)
    assert json.loads(first.stdout)["applied"] == every
    assert (tmp_path / "mempipe.db").exists(), "the default store is ./mempipe.db"
    pending = invoke("migrate", "--pending", "--json", cwd=tmp_path)
    assert json.loads(pending.stdout)["pending"] == []
    again = invoke("migrate", "--json", cwd=tmp_path)
    assert json.loads(again.stdout)["applied"] == []
    assert json.loads(again.stdout)["already_applied"] == every
    init_again = invoke("init", cwd=tmp_path)
    assert init_again.stdout.startswith("store exists; applied: nothing (up to date)")


def test_the_store_can_be_named_by_the_environment(tmp_path) -> None:
    env_store = f"sqlite:///{tmp_path / 'from-env.db'}"
    created = invoke("init", "--json", cwd=tmp_path, env={"MEMPIPE_STORE": env_store})
    result = invoke("stats", "--json", cwd=tmp_path, env={"MEMPIPE_STORE": env_store})
    assert json.loads(created.stdout)["store"] == env_store
    assert json.loads(result.stdout)["store"] == env_store


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("backfill", "nowhere/*.jsonl"), "matches no archive file"),
        (("backfill", "missing.json"), "no such file or directory"),
        (("stats", "--store", "sqlite:///no/such/dir/m.db"), "no store at"),
        (("stats", "--store", "redis://localhost"), "unsupported store URL scheme"),
    ],
)
def test_an_unusable_path_or_store_is_a_clear_error_with_a_non_zero_exit(
    tmp_path, args, message
) -> None:
    result = invoke(*args, "--json", cwd=tmp_path)
    assert result.exit_code == 1
    assert message in json.loads(result.stdout)["error"], "--json: the error as one document"
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_config_file_is_a_clear_error(tmp_path) -> None:
    (tmp_path / "project-config.yaml").write_text("memory:\n  metadata_partition_keys: [Bad]\n")
    result = invoke("stats", cwd=tmp_path)
    assert result.exit_code == 1
    assert "metadata_partition_keys" in result.stderr
    assert "'Bad'" in result.stderr


def every_command(
    group: click.Group = cli, path: str = "mempipe"
) -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        yield f"{path} {name}", command
        if isinstance(command, click.Group):
            yield from every_command(command, f"{path} {name}")


def test_every_option_of_every_command_says_what_it_does() -> None:
    for path, command in every_command():
        for option in command.params:
            if isinstance(option, click.Option):
                assert option.help, f"`{path} {option.opts[0]}` has no help text"


def test_a_search_s_identity_options_are_filters_and_a_backfill_s_name_what_it_brings_in() -> None:
    helps = {
        path: {option.opts[0]: option.help for option in command.params}
        for path, command in every_command()
    }
    assert helps["mempipe search"]["--user-id"] == "Only this user's records."
    assert helps["mempipe backfill"]["--user-id"] == (
        "The user of the records brought in (a record's own differing: --identity)."
    )


def test_every_command_is_in_the_commands_page() -> None:
    listed = page("reference/commands.md")
    for name, command in cli.commands.items():
        assert re.search(rf"mempipe {name}\b", listed), f"the commands page lacks `{name}`"
        assert command.help, f"`{name}` has no help text"


@pytest.mark.prefect
def test_replay_and_report_json_on_the_embedded_default(prefect_server, tmp_path) -> None:
    sample = ROOT / "examples" / "sample-archive"
    store = ("--store", "sqlite:///memory.db")
    backfill = invoke(
        "backfill",
        str(sample),
        "--user-id",
        "maya",
        *store,
        "--json",
        cwd=tmp_path,
    )
    assert backfill.exit_code == 0, backfill.stderr
    replayed = invoke("replay", *store, "--json", cwd=tmp_path)
    assert replayed.exit_code == 0, replayed.stderr
    summary = json.loads(replayed.stdout)
    assert summary["embedding_model"] == "all-MiniLM-L6-v2", "the local model is the default"
    assert (summary["added"], summary["updated"], summary["reinforced"]) == (8, 2, 1)
    assert summary["unembedded"] == 0
    reported = invoke("report", *store, "--json", cwd=tmp_path)
    report = json.loads(reported.stdout)
    assert report["rows"] == 11
    assert report["files"] == [str(Path(f)) for f in summary["audit_files"]]


@pytest.mark.prefect
def test_reembed_models_and_eval_from_the_cli(prefect_server, tmp_path) -> None:
    sample = ROOT / "examples" / "sample-archive"
    store = ("--store", "sqlite:///memory.db")
    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-64\n")
    for command in (("backfill", str(sample), "--user-id", "maya"), ("replay",)):
        done = invoke(*command, *store, "--json", cwd=tmp_path)
        assert done.exit_code == 0, done.stderr

    models = json.loads(invoke("models", *store, "--json", cwd=tmp_path).stdout)
    assert {"id": "hashing-64", "dimensions": 64, "active": True, "bridges": []} in models

    queries = tmp_path / "queries.jsonl"
    lis = json.loads(
        invoke(
            "search", "home airport LIS", *store, "--mode", "text", "--json", cwd=tmp_path
        ).stdout
    )["hits"][0]["id"]
    lines = [
        {"query": "home airport", "relevant_ids": [lis], "question_type": "travel", "note": "x"},
        {"query": "window seat", "relevant_ids": ["no-such-id"], "question_type": "seats"},
    ]
    queries.write_text("".join(json.dumps(line) + "\n" for line in lines))
    details = tmp_path / "details.jsonl"
    evaluated = json.loads(
        invoke(
            "eval",
            str(queries),
            *store,
            "--k",
            "1",
            "--k",
            "5",
            "--details",
            str(details),
            "--json",
            cwd=tmp_path,
        ).stdout
    )
    assert evaluated["queries"] == 2
    assert evaluated["ignored_fields"] == {"note": 1}, "unknown fields are counted, not fatal"
    assert evaluated["group_by"] == "question_type"
    assert {g["group"]: g["queries"] for g in evaluated["groups"]} == {"seats": 1, "travel": 1}
    assert set(evaluated["recall_at"]) == {"1", "5"}
    assert evaluated["recall"] == evaluated["recall_at"]["1"]
    written = [json.loads(line) for line in details.read_text().splitlines()]
    assert [d["ranks"] for d in written][1] == {"no-such-id": None}
    assert written[0]["ranks"][lis] in range(1, 6)
    strict = invoke("eval", str(queries), *store, "--strict", cwd=tmp_path)
    assert strict.exit_code != 0
    assert "queries.jsonl:1: unknown field(s) note (--strict)" in strict.stderr

    moved = invoke(
        "reembed",
        "--model",
        "hashing-128",
        "--gate",
        str(queries),
        *store,
        "--json",
        cwd=tmp_path,
    )
    summary = json.loads(moved.stdout)
    assert moved.exit_code == 0, moved.stderr
    assert summary["switched"] is True
    gate = summary["gate"]
    assert gate["queries"] == 2
    for model, recall in (("hashing-64", gate["old_recall"]), ("hashing-128", gate["new_recall"])):
        printed = invoke(
            "eval",
            str(queries),
            *store,
            "--mode",
            "semantic",
            "--model",
            model,
            "--json",
            cwd=tmp_path,
        )
        assert json.loads(printed.stdout)["recall"] == recall, "the gate's verdict is eval's"
    serving = {
        m["id"]: m["active"]
        for m in json.loads(invoke("models", *store, "--json", cwd=tmp_path).stdout)
    }
    assert serving["hashing-128"] is True
    assert serving["hashing-64"] is False
    rolled = invoke("reembed", "rollback", *store, "--json", cwd=tmp_path)
    assert "semantic" in json.loads(rolled.stdout)["collections"]


@pytest.mark.parametrize(("given", "expected"), [(None, 180), ("45", 45)])
@pytest.mark.process("a fresh interpreter's settings, read as mempipe.cli is imported")
def test_the_cli_waits_for_a_slow_temporary_prefect_server(given, expected) -> None:
    """Prefect's own 20 s start-up wait fails commands on a busy machine; the CLI waits
    longer unless the user set the wait."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_SERVER_EPHEMERAL")}
    if given:
        env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = given
    probe = (
        "import mempipe.cli\n"
        "from prefect.settings import get_current_settings\n"
        "print(get_current_settings().server.ephemeral.startup_timeout_seconds)"
    )
    shown = python(probe, env)
    assert int(shown.stdout) == expected


@pytest.mark.prefect
def test_export_then_import_a_bundle_from_the_cli(prefect_server, tmp_path) -> None:
    sample = ROOT / "examples" / "sample-archive"
    source = ("--store", "sqlite:///source.db")
    target = ("--store", "sqlite:///target.db")
    loaded = invoke("backfill", str(sample), "--user-id", "maya", *source, cwd=tmp_path)
    assert loaded.exit_code == 0, loaded.stderr

    exported = invoke("export", "--out", "bundle", *source, "--json", cwd=tmp_path)
    summary = json.loads(exported.stdout)
    assert set(summary) >= {"out", "counts", "digests", "seconds"}
    assert summary["counts"]["turns"] == 20
    assert (
        json.loads((tmp_path / "bundle" / "manifest.json").read_text())["digests"]
        == (summary["digests"])
    )

    runs = []
    for spelling in ("bundle", "mempipe"):
        imported = invoke(
            "import",
            "bundle",
            "--format",
            spelling,
            *target,
            "--json",
            cwd=tmp_path,
        )
        assert imported.exit_code == 0, imported.stderr
        runs.append(json.loads(imported.stdout))
        deprecated = "deprecated: --format mempipe is now --format bundle"
        assert (deprecated in imported.stderr) is (spelling == "mempipe"), imported.stderr
    assert runs[0]["written"]["turns"] == 20
    assert runs[0]["digests_match"] is True
    assert sum(runs[1]["written"].values()) == 0, "a second import writes nothing"
    assert runs[1]["digests_match"] is True


@pytest.mark.prefect
def test_erase_asks_first_counts_when_dry_and_leaves_a_record_without_content(
    prefect_server, tmp_path
) -> None:
    sample = ROOT / "examples" / "sample-archive"
    store = ("--store", "sqlite:///memory.db")
    loaded = invoke("backfill", str(sample), "--user-id", "maya", *store, cwd=tmp_path)
    assert loaded.exit_code == 0, loaded.stderr

    def erase(*extra: str):
        return invoke("erase", "--user-id", "maya", *extra, *store, cwd=tmp_path)

    dry = erase("--dry-run", "--json")
    assert json.loads(dry.stdout)["counts"]["turns"] == 20
    refused = erase()  # no terminal to answer the question: nothing happens
    assert refused.exit_code != 0
    assert "Aborted" in refused.stderr
    assert json.loads(erase("--dry-run", "--json").stdout)["counts"]["turns"] == 20

    done = erase("--yes", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["turns"] == 20
    assert json.loads(invoke("stats", *store, "--json", cwd=tmp_path).stdout)["turns"] == 0
    runs = json.loads(invoke("runs", *store, "--json", cwd=tmp_path).stdout)["runs"]
    (record,) = [r["run"] for r in runs if r["run"]["flow"] == "erase"]
    assert record["parameters"] == {"user_id": "maya"}
    assert record["counts"]["turns"] == 20


@pytest.mark.prefect
def test_import_mem0_memories_from_the_cli(prefect_server, tmp_path) -> None:
    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-64\n")
    args = [
        "import",
        str(ROOT / "examples" / "mem0-get-all.json"),
        "--format",
        "mem0",
    ]
    args += ["--org-id", "acme", "--project-id", "travel", "--store", "sqlite:///m.db", "--json"]
    first = invoke(*args, cwd=tmp_path)
    assert first.exit_code == 0, first.stderr
    summary = json.loads(first.stdout)
    assert set(summary) >= {
        "run_id",
        "records_read",
        "added",
        "updated",
        "reinforced",
        "duplicates_skipped",
        "rejected",
        "rejects_path",
        "without_vector",
        "seconds",
    }
    assert (summary["added"], summary["reinforced"], summary["rejected"]) == (3, 1, 1)
    assert summary["audit_files"], "the import's audit reaches Parquet"
    again = json.loads(invoke(*args, cwd=tmp_path).stdout)
    assert (again["added"], again["duplicates_skipped"]) == (0, 4)


@pytest.mark.prefect
@pytest.mark.process("Prefect's logs on a real command's stderr, quiet or -v")
def test_flow_commands_are_quiet_unless_verbose(prefect_server, tmp_path) -> None:
    sample = ROOT / "examples" / "sample-archive"
    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-64\n")
    store = ("--store", "sqlite:///memory.db")
    env = environment(prefect_server)
    quiet = run(["backfill", str(sample), "--user-id", "maya", *store], tmp_path, env)
    assert quiet.returncode == 0, quiet.stderr
    assert "INFO" not in quiet.stderr
    assert "Loading weights" not in quiet.stderr
    assert "mempipe reembed --incremental" in quiet.stdout, "it says how to search by meaning"

    loud = run(["-v", "backfill", str(sample), "--user-id", "maya", *store], tmp_path, env)
    assert "| INFO    |" in loud.stderr


@pytest.mark.prefect
def test_backfill_embed_makes_turns_searchable_at_once(prefect_server, tmp_path) -> None:
    sample = ROOT / "examples" / "sample-archive"
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    store = ("--store", "sqlite:///memory.db")
    embedded = invoke(
        "backfill",
        str(sample),
        "--user-id",
        "maya",
        "--embed",
        *store,
        "--json",
        cwd=tmp_path,
    )
    assert json.loads(embedded.stdout)["embedded"] == 20
    found = invoke(
        "search",
        "home airport",
        "--source",
        "stm",
        "--mode",
        "semantic",
        "--user-id",
        "maya",
        *store,
        "--json",
        cwd=tmp_path,
    )
    assert json.loads(found.stdout)["hits"]
    again = invoke(
        "backfill",
        str(sample),
        "--user-id",
        "maya",
        "--embed",
        *store,
        "--json",
        cwd=tmp_path,
    )
    assert json.loads(again.stdout)["embedded"] == 0, "re-running adds nothing"
