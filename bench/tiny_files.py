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


if __name__ == "__main__":
    main()
