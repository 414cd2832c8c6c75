"""An erase reaches every file mempipe wrote with the user's text (DESIGN rule: every file
mempipe wrote with the owner's text is redacted or named as left): audit folders written by
replay and report wherever they went, rejects files, and bundles, which are named as left until
deleted. An erase that leaves text anywhere fails (exit 1) naming each file; an --audit-dir
that does not exist is an error before anything is erased."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import invoke

pytestmark = pytest.mark.prefect
SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"


def rejects_lines(folder: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((folder / "mempipe-rejects").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def audit_texts(folder: Path) -> set[str]:
    return set(
        pl.read_parquet(folder / "**" / "*.parquet").filter(pl.col("user_id") == "maya")["text"]
    )


def test_an_erase_redacts_every_recorded_file_and_fails_while_a_bundle_holds_the_user(
    prefect_server, tmp_path
) -> None:
    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-64\n")
    args = ["--store", "sqlite:///memory.db", "--config", str(config)]
    for step in (
        ["backfill", str(SAMPLE), "--user-id", "maya"],
        ["replay", "--audit-dir", "first-audit"],
        ["report", "--out", "elsewhere/second-audit"],
        ["export", "--out", "maya-bundle", "--user-id", "maya"],
    ):
        done = invoke(*step, *args, cwd=tmp_path)
        assert done.exit_code == 0, (step, done.stderr)
    assert rejects_lines(tmp_path)[0]["raw"] != "[erased]"
    assert audit_texts(tmp_path / "first-audit") - {"[erased]"}

    missing = invoke(
        "erase",
        "--user-id",
        "maya",
        "--yes",
        "--audit-dir",
        "nowhere",
        *args,
        "--json",
        cwd=tmp_path,
    )
    assert missing.exit_code == 1
    assert json.loads(missing.stdout)["kind"] == "config"
    assert json.loads(invoke("stats", *args, "--json", cwd=tmp_path).stdout)["turns"] == 20

    erased = invoke("erase", "--user-id", "maya", "--yes", *args, "--json", cwd=tmp_path)

    assert erased.exit_code == 1, "a bundle still holds maya's rows"
    document = json.loads(erased.stdout)
    assert document["kind"] == "incomplete"
    left = [f for f in document["files"] if f["left"]]
    assert [Path(f["path"]).name for f in left] == ["maya-bundle"]
    assert "maya-bundle" in document["error"]
    kinds = sorted(f["kind"] for f in document["files"] if not f["left"])
    assert kinds == ["audit", "audit", "rejects"]
    for folder in ("first-audit", "elsewhere/second-audit"):
        assert audit_texts(tmp_path / folder) == {"[erased]"}, folder
    assert {line["raw"] for line in rejects_lines(tmp_path)} == {"[erased]"}
    assert json.loads(invoke("stats", *args, "--json", cwd=tmp_path).stdout)["turns"] == 0

    shutil.rmtree(tmp_path / "maya-bundle")
    again = invoke("erase", "--user-id", "maya", "--yes", *args, "--json", cwd=tmp_path)
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["files"] == [], "nothing of maya is left anywhere"


def file_bytes(folder: Path, skip: tuple[str, ...]) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith(skip)
    }


def test_an_erase_reaches_only_its_own_stores_files_in_a_folder_two_stores_share(
    prefect_server, tmp_path
) -> None:
    """Two stores in one directory, both writing ./audit and ./mempipe-rejects, and a copy of
    one: an erase in any of them leaves every file of the others byte-identical."""
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")

    stores = ("a.db", "b.db", "c.db")
    own: dict[str, set[str]] = {store: set() for store in stores}

    def mempipe(*args: str, store: str) -> None:
        """Run a command on ``store``; the files it adds or changes are that store's."""
        before = file_bytes(tmp_path, stores)
        done = invoke(*args, "--store", f"sqlite:///{store}", cwd=tmp_path)
        assert done.exit_code == 0, (args, done.stderr)
        after = file_bytes(tmp_path, stores)
        own[store] |= {name for name in after if before.get(name) != after[name]}

    for store in ("a.db", "b.db"):
        mempipe("backfill", str(SAMPLE), "--user-id", "maya", store=store)
        mempipe("replay", store=store)
        mempipe("report", "--out", f"report-{store}", "--html", f"page-{store}.html", store=store)
    mempipe("copy", "--to", "sqlite:///c.db", store="a.db")
    own["c.db"] = set()
    mempipe("report", "--out", "report-c.db", "--html", "page-c.db.html", store="c.db")
    before = file_bytes(tmp_path, stores)
    assert any(name.startswith("audit/") for name in own["a.db"] & set(before))
    assert any(name.startswith("audit/") for name in own["b.db"] & set(before))
    assert any(name.startswith("mempipe-rejects/") for name in own["b.db"])

    for erased in ("b.db", "c.db", "a.db"):
        done = invoke(
            "erase", "--user-id", "maya", "--yes", "--store", f"sqlite:///{erased}", cwd=tmp_path
        )
        assert done.exit_code == 0, done.stderr
        after = file_bytes(tmp_path, stores)
        changed = {name for name in before if after.get(name) != before[name]}
        assert changed, f"the erase in {erased} redacted its own files"
        assert changed <= own[erased], f"the erase in {erased} changed {changed - own[erased]}"
        before = after
