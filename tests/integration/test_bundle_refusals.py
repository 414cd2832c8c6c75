"""A bundle that differs from its manifest is refused before anything is written (issue 54): a
flipped byte, a truncated file, a record's text edited, a manifest's count or vector file that
lies, a vector of the wrong size. Each is ``import --format bundle`` exiting 1 with one
``error:`` line naming the bundle's file (kind ``archive``, never the store's fault and never
``internal``), and the target store as it was: not created where it was not there, unchanged
byte for byte where it was."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from mempipe.cli import cli

SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"


def run(*args: str, expect: int = 0) -> dict:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == expect, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def exported(prefect_server, tmp_path_factory) -> Path:
    """A bundle of the sample's turns, snapshots and memories, with its vectors."""
    folder = tmp_path_factory.mktemp("exported")
    (folder / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        run("backfill", str(SAMPLE), "--user-id", "maya", "--embed")
        run("replay")
        run("export", "--out", "bundle", "--with-vectors")
    return folder / "bundle"


def flip_a_byte(bundle: Path) -> Path:
    """A byte of a memory's text, where the file holds it."""
    path = bundle / "semantic.parquet"
    data = bytearray(path.read_bytes())
    data[data.index(b"Lisbon")] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def truncate(bundle: Path) -> Path:
    path = bundle / "turns.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def edit_a_text(bundle: Path) -> Path:
    path = bundle / "semantic.parquet"
    table = pq.read_table(path)
    texts = table.column("text").to_pylist()
    texts[0] = texts[0] + " (edited)"
    pq.write_table(table.set_column(table.schema.get_field_index("text"), "text", [texts]), path)
    return path


def count_that_lies(bundle: Path) -> Path:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["counts"]["semantic"] = 999999
    path.write_text(json.dumps(manifest))
    return bundle / "semantic.parquet"


def unknown_vectors(bundle: Path) -> Path:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["vectors"]["semantic"] = "hashing-999"
    path.write_text(json.dumps(manifest))
    return path


def short_vector(bundle: Path) -> Path:
    path = bundle / "vectors-turns.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["vector"] = rows[0]["vector"][:63]
    schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32()))])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


DAMAGE: dict[str, Callable[[Path], Path]] = {
    "a flipped byte": flip_a_byte,
    "a truncated file": truncate,
    "a record's text edited": edit_a_text,
    "a count that lies": count_that_lies,
    "a vector file its registry lacks": unknown_vectors,
    "a vector of 63 dimensions": short_vector,
}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_bundle_that_differs_from_its_manifest_is_refused_before_any_write(
    damage, exported, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    bundle = tmp_path / "bundle"
    shutil.copytree(exported, bundle)
    named = DAMAGE[damage](bundle)
    run("init", "--store", "sqlite:///held.db")
    before = digest(tmp_path / "held.db")
    for target in ("sqlite:///held.db", "sqlite:///new.db"):
        result = CliRunner().invoke(
            cli, ["import", str(bundle), "--format", "bundle", "--store", target, "--json"]
        )
        assert result.exit_code == 1, result.output
        document = json.loads(result.stdout)
        assert document["kind"] == "archive", document
        assert document["error"].startswith(f"{named}: "), document["error"]
        assert "nothing was imported" in document["error"]
        (line,) = result.stderr.splitlines()
        assert line == f"error: {document['error']}"
    assert digest(tmp_path / "held.db") == before, "the target store is as it was"
    assert not (tmp_path / "new.db").exists(), "no store was created"


def test_the_bundle_as_exported_imports_with_its_digests(exported, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    imported = run("import", str(exported), "--format", "bundle", "--store", "sqlite:///ok.db")
    assert imported["digests_match"]
    assert sum(imported["written"].values()) > 0
    assert [(u["user_id"], u["records"]) for u in imported["users"]] == [("maya", 20 + 10)], (
        "the import names whose records it brought: 20 turns, 10 memory versions"
    )
