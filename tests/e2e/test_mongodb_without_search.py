"""MongoDB over the wire, on a server without search (SecantusDB, a replica set like MongoDB
Community without mongot): every job that needs no search works through the real driver, and
what needs search says so before it writes."""

from __future__ import annotations

import json
import shutil
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from mempipe.adapters.store import open_store
from tests.helpers import invoke, noisy_lines

pytestmark = pytest.mark.prefect
ROOT = Path(__file__).parents[2]


@pytest.fixture
def store_url(secantus_uri: str) -> str:
    return f"{secantus_uri}/mp_{uuid.uuid4().hex[:8]}?replicaSet=secantus"


def ran(*args: str, cwd: Path) -> dict:
    done = invoke(*args, "--json", cwd=cwd)
    assert done.exit_code == 0, done.output
    assert noisy_lines(done.stderr) == "", done.stderr
    return json.loads(done.stdout)


def test_backfill_replay_report_export_erase_and_copy_back_without_search(
    prefect_server, store_url, tmp_path
) -> None:
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    store = ("--store", store_url)
    sample = ROOT / "examples" / "sample-archive"

    backfill = ran("backfill", str(sample), "--user-id", "maya", *store, cwd=tmp_path)
    assert backfill["turns_inserted"] == 20
    replay = ran("replay", *store, cwd=tmp_path)
    assert (replay["added"], replay["updated"], replay["reinforced"]) == (8, 2, 1), (
        "reconciliation by exact scan finds what the vector index finds on SQLite"
    )
    report = ran("report", *store, cwd=tmp_path)
    assert report["rows"] == 11
    exported = ran("export", "--out", "bundle", *store, cwd=tmp_path)
    assert exported["counts"]["turns"] == 20

    copied = ran("copy", *store, "--to", "sqlite:///back.db", cwd=tmp_path)
    assert copied["verified"] is True, "every collection's count and digest agree"
    back = ran(
        "export",
        "--out",
        "back-bundle",
        "--store",
        "sqlite:///back.db",
        cwd=tmp_path,
    )
    mine = {k: v for k, v in exported["digests"].items() if k != "runs"}
    assert {k: v for k, v in back["digests"].items() if k != "runs"} == mine, (
        "the same records (each store keeps its own runs: the copy is recorded in its target)"
    )

    shutil.rmtree(tmp_path / "bundle")
    shutil.rmtree(tmp_path / "back-bundle")
    erased = ran("erase", "--user-id", "maya", "--yes", *store, cwd=tmp_path)
    assert erased["counts"]["turns"] == 20
    stats = ran("stats", *store, cwd=tmp_path)
    assert stats["turns"] == 0

    indexes = ran("rebuild-indexes", *store, cwd=tmp_path)
    assert {i["state"] for i in indexes["indexes"]} == {"pending"}, "created once search exists"
    with closing(open_store(store_url)) as opened:
        recorded = opened.db["capabilities"].find_one({"_id": "server"})
    assert (recorded["search"], recorded["vector_search"]) == (False, False)


@pytest.mark.parametrize(
    "command",
    [("search", "home airport"), ("reembed", "--incremental"), ("eval", "queries.jsonl")],
)
def test_what_needs_search_says_so_and_changes_nothing(
    prefect_server, store_url, tmp_path, command
) -> None:
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    shutil.copy(ROOT / "examples" / "queries.jsonl", tmp_path / "queries.jsonl")
    store = ("--store", store_url)
    sample = ROOT / "examples" / "sample-archive"
    ran("backfill", str(sample), "--user-id", "maya", *store, cwd=tmp_path)
    before = ran("stats", *store, cwd=tmp_path)

    refused = invoke(*command, *store, "--json", cwd=tmp_path)
    assert refused.exit_code == 1
    error = json.loads(refused.stdout)
    assert error["kind"] == "store"
    assert f": {command[0]} needs search indexes" in error["error"]
    assert "nothing was changed" in error["error"]
    assert "MongoDB Atlas or self-managed MongoDB 8.2+ with mongot" in error["error"]
    assert ran("stats", *store, cwd=tmp_path) == before


def test_a_replay_over_the_exact_scan_limit_is_refused_before_it_starts(
    prefect_server, store_url, tmp_path, monkeypatch
) -> None:
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    store = ("--store", store_url)
    sample = ROOT / "examples" / "sample-archive"
    ran("backfill", str(sample), "--user-id", "maya", *store, cwd=tmp_path)
    ran("replay", *store, cwd=tmp_path)
    ran("replay", "--force", *store, cwd=tmp_path)
    before = ran("stats", *store, cwd=tmp_path)

    monkeypatch.setenv("MEMPIPE_MONGODB_EXACT_SCAN_LIMIT", "3")
    refused = invoke("replay", "--force", *store, "--json", cwd=tmp_path)
    assert refused.exit_code == 1
    error = json.loads(refused.stdout)["error"]
    assert "default/default/maya holds 4 semantic memories, more than the 3" in error
    assert "nothing was changed" in error
    assert ran("stats", *store, cwd=tmp_path) == before
