"""A directory of many tiny archives: one 2-turn canonical JSONL conversation per file, backfilled
by a whole ``mempipe backfill DIR`` process, against a minimal reader of the same files (json +
apsw + an FTS5 index, one transaction) measured in the same run.

    python bench/tiny_files.py [--files 20000] [--api-url URL]

Without ``--api-url`` the command reports to mempipe's server for a session of commands,
started beforehand (untimed) in a Prefect home of the run's own, as for every command after a
session's first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).parent))

from processes import run_mempipe, session_server


def write_files(folder: Path, count: int, rejects_every: int = 0) -> None:
    """``count`` two-turn archives; with ``rejects_every``, every so many a third record that is
    a reject."""
    folder.mkdir(parents=True)
    for n in range(count):
        lines = [
            {"session_id": f"s{n}", "turn_seq": 0, "role": "user", "content": f"note {n}: call"},
            {"session_id": f"s{n}", "turn_seq": 1, "role": "assistant", "content": "will do"},
        ]
        if rejects_every and n % rejects_every == 0:
            lines.append({"session_id": f"s{n}", "turn_seq": 2, "role": "robot", "content": "?"})
        (folder / f"c{n:06d}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in lines))


def minimal_reader(folder: Path, db: Path) -> float:
    """What any program that reads these files into SQLite with a text index must do."""
    started = time.perf_counter()
    conn = apsw.Connection(str(db))
    conn.execute(
        "CREATE TABLE turns (id INTEGER PRIMARY KEY, session_id TEXT, turn_seq INT, role TEXT, "
        "content TEXT, UNIQUE (session_id, turn_seq));"
        "CREATE VIRTUAL TABLE turns_fts USING fts5(content, content='turns', content_rowid='id')"
    )
    with conn:
        for path in sorted(folder.iterdir()):
            with path.open() as f:
                for line in f:
                    t = json.loads(line)
                    conn.execute(
                        "INSERT INTO turns (session_id, turn_seq, role, content) VALUES (?,?,?,?)",
                        (t["session_id"], t["turn_seq"], t["role"], t["content"]),
                    )
                    conn.execute(
                        "INSERT INTO turns_fts (rowid, content) VALUES (?, ?)",
                        (conn.last_insert_rowid(), t["content"]),
                    )
    conn.close()
    return time.perf_counter() - started


SAME_ROWS_SCHEMA = """
CREATE TABLE turns (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,
    user_id TEXT, session_id TEXT NOT NULL, turn_seq INTEGER NOT NULL, role TEXT NOT NULL,
    name TEXT, content TEXT NOT NULL, created_at TEXT, source_path TEXT, source_line INTEGER,
    snapshot_id TEXT);
CREATE UNIQUE INDEX turn_key ON turns
    (org_id, project_id, coalesce(user_id, ''), session_id, turn_seq);
CREATE INDEX turns_by_user ON turns (user_id);
CREATE VIRTUAL TABLE turns_fts USING fts5(name, content, content='turns', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TABLE snapshots (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,
    user_id TEXT, session_id TEXT NOT NULL, first_turn_seq INTEGER NOT NULL,
    last_turn_seq INTEGER NOT NULL, turn_count INTEGER NOT NULL);
"""


def same_rows_reader(folder: Path, db: Path, validate: bool) -> float:
    """What any reader must write for mempipe's schema (as ``bench/export.py``'s same-rows
    reader): turns with their key, owner index and source, the stemmed index of speaker and
    text, a snapshot per session, each turn once with its snapshot; in batches of 5,000 turns.
    ``validate``: each turn made a :class:`mempipe.schemas.turn.Turn` first (pydantic at the
    boundary, as mempipe's reader does)."""
    from mempipe.schemas.turn import Turn

    started = time.perf_counter()
    conn = apsw.Connection(str(db))
    conn.execute(SAME_ROWS_SCHEMA)
    insert = (
        "INSERT INTO turns (org_id, project_id, user_id, session_id, turn_seq, role, name, "
        "content, created_at, source_path, source_line, snapshot_id) "
        "VALUES ('o', 'p', NULL, ?, ?, ?, NULL, ?, NULL, ?, ?, ?) ON CONFLICT DO NOTHING"
    )
    cut = "INSERT INTO snapshots VALUES (?, 'o', 'p', NULL, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
    rows: list[tuple[object, ...]] = []
    snapshots: list[tuple[object, ...]] = []

    def write() -> None:
        with conn:
            before = conn.execute("SELECT coalesce(max(id), 0) FROM turns").fetchall()[0][0]
            conn.executemany(insert, rows)
            conn.execute(
                "INSERT INTO turns_fts (rowid, name, content) SELECT id, name, content "
                "FROM turns WHERE id > ?",
                (before,),
            )
            conn.executemany(cut, snapshots)
        rows.clear()
        snapshots.clear()

    for path in sorted(folder.iterdir()):
        name = str(path)
        sessions: dict[str, list[int]] = {}
        with path.open() as f:
            for line, text in enumerate(f, 1):
                t = json.loads(text)
                if validate:
                    t = Turn.model_validate(
                        {
                            **t,
                            "org_id": "o",
                            "project_id": "p",
                            "source": {"path": name, "line": line},
                        }
                    ).model_dump()
                session, seq = t["session_id"], t["turn_seq"]
                sessions.setdefault(session, []).append(seq)
                rows.append((session, seq, t["role"], t["content"], name, line, f"{session}:0"))
        for session, seqs in sessions.items():
            snapshots.append((f"{session}:0", session, min(seqs), max(seqs), len(seqs)))
        if len(rows) >= 5000:
            write()
    write()
    conn.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--api-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = work / "archive"
        write_files(folder, args.files)
        reference = minimal_reader(folder, work / "reference.db")
        same_rows = same_rows_reader(folder, work / "same-rows.db", validate=False)
        validated = same_rows_reader(folder, work / "validated.db", validate=True)
        if args.api_url:
            os.environ["PREFECT_API_URL"] = args.api_url
        with session_server(work):
            run = run_mempipe(
                ["backfill", str(folder), "--store", f"sqlite:///{work / 'm.db'}", "--json"], work
            )
        summary = json.loads(run.stdout)
        read = summary["turns_inserted"]
        assert read == 2 * args.files, read
        again = subprocess.run(
            [sys.executable, "-m", "mempipe", "stats", "--store", f"sqlite:///{work / 'm.db'}"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert str(2 * args.files) in again.stdout.replace(",", "")
    files_s, reference_s = args.files / run.seconds, args.files / reference
    print(f"files: {args.files:,} ({2 * args.files:,} turns)")
    print(f"mempipe backfill, whole process: {files_s:,.0f} files/s ({run.seconds:.1f} s)")
    print(f"reference (json + apsw + FTS5, one transaction): {reference_s:,.0f} files/s")
    print(f"ratio: {files_s / reference_s:.2f}")
    print(
        f"the same rows as mempipe's schema, batches of 5,000: {args.files / same_rows:,.0f} "
        f"files/s ({reference / same_rows:.2f} of the reference); each turn validated as a "
        f"Turn besides: {args.files / validated:,.0f} files/s ({reference / validated:.2f})"
    )


if __name__ == "__main__":
    main()
