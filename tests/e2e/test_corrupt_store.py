"""A damaged store file (issue 38): writes start with SQLite's quick check, so a backfill into a
file whose index pages are garbage is refused before anything is written (the file unchanged);
damage met later (a text that is not UTF-8, a vector page of random bytes) is a ``store`` error
naming the file and the way out, never an internal one; ``stats --check`` runs the full check."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import apsw
import pytest

from tests.helpers import invoke

pytestmark = pytest.mark.prefect


def write_archive(path: Path, user: str) -> None:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "session_id": f"s{i // 2}",
                    "turn_seq": i % 2,
                    "role": "user",
                    "content": f"My seat preference number {i} is the aisle.",
                    "created_at": "2024-01-01T00:00:00Z",
                    "user_id": user,
                }
            )
            + "\n"
            for i in range(300)
        )
    )


def checkpointed(db: Path) -> apsw.Connection:
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def store(prefect_server, tmp_path) -> Path:
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    write_archive(tmp_path / "first.jsonl", "ann")
    write_archive(tmp_path / "second.jsonl", "bob")
    done = invoke("backfill", "first.jsonl", "--embed", cwd=tmp_path)
    assert done.exit_code == 0, done.stderr
    checkpointed(tmp_path / "mempipe.db").close()
    return tmp_path


def test_a_backfill_into_a_damaged_store_is_refused_and_writes_nothing(store) -> None:
    folder = store
    db = folder / "mempipe.db"
    conn = checkpointed(db)
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'turn_key'").fetchone()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with db.open("r+b") as file:
        file.seek(page_size * (root - 1) + 8)
        file.write(b"\xde\xad\xbe\xef" * 50)
    before = digest(db)

    refused = invoke("backfill", "second.jsonl", "--json", cwd=folder)

    assert refused.exit_code == 1
    document = json.loads(refused.stdout)
    assert document["kind"] == "store"
    assert "the store file is damaged" in document["error"]
    assert str(db.name) in document["error"]
    assert "`.recover`" in document["error"]
    assert digest(db) == before, "nothing was written to the damaged file"
    assert "Traceback" not in refused.stderr

    checked = invoke("stats", "--check", "--json", cwd=folder)
    assert checked.exit_code == 1
    assert "Tree" in json.loads(checked.stdout)["error"], "SQLite's findings are named"


def test_damage_met_while_reading_is_a_store_error_not_an_internal_one(store) -> None:
    folder = store
    sound = invoke("stats", "--check", "--json", cwd=folder)
    assert sound.exit_code == 0, sound.stderr
    assert json.loads(sound.stdout)["integrity"] == []

    garbled = folder / "garbled"
    garbled.mkdir()
    shutil.copy(folder / "mempipe.db", garbled / "mempipe.db")
    shutil.copy(folder / "project-config.yaml", garbled)
    conn = apsw.Connection(str(garbled / "mempipe.db"))
    conn.execute("UPDATE turns SET content = CAST(x'ff41' AS TEXT) WHERE turn_seq = 0")
    conn.close()
    for command in (
        ["export", "--out", "bundle"],
        ["search", "aisle", "--source", "stm", "--mode", "text"],
    ):
        done = invoke(*command, "--json", cwd=garbled)
        assert done.exit_code == 1, (command, done.stdout, done.stderr)
        document = json.loads(done.stdout)
        assert document["kind"] == "store", (command, document)
        assert "the store file is damaged" in document["error"]
        assert "Traceback" not in done.stderr

    vectors = folder / "vectors"
    vectors.mkdir()
    shutil.copy(folder / "mempipe.db", vectors / "mempipe.db")
    shutil.copy(folder / "project-config.yaml", vectors)
    conn = apsw.Connection(str(vectors / "mempipe.db"))
    chunks = [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE '%vector_chunks00'"
        )
    ]
    assert chunks, "the turns were embedded"
    conn.execute(f'UPDATE "{chunks[0]}" SET vectors = randomblob(16)')
    conn.close()
    done = invoke(
        "search", "aisle seat", "--source", "stm", "--mode", "semantic", "--json", cwd=vectors
    )
    assert done.exit_code == 1, (done.stdout, done.stderr)
    document = json.loads(done.stdout)
    assert document["kind"] == "store", document
    assert "the store file is damaged" in document["error"]
