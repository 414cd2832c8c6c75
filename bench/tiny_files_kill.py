"""A kill -9 in the middle of a backfill of many tiny files, then the same command again: the end
state compared, row for row, with an uninterrupted backfill of the same directory (issue 56).

    python bench/tiny_files_kill.py [--files 200000] [--rejects-every 1000] [--kill-at 0.5]

Both backfills report to mempipe's session server, started beforehand. The killed one is sent
SIGKILL once its store holds ``--kill-at`` of the directory's turns; the rerun's JSON document
must account for every file (its turns inserted now or kept from the killed run, its rejects),
and the turns, their snapshots and the rejects must equal the uninterrupted run's.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).parent))

from processes import run_mempipe, session_server
from tiny_files import write_files

TURNS = "SELECT session_id, turn_seq, role, content, snapshot_id IS NOT NULL FROM turns"
SNAPSHOTS = "SELECT session_id, first_turn_seq, last_turn_seq FROM snapshots"


def rows(db: Path, query: str) -> list[tuple]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return sorted(conn.execute(query).fetchall())
    finally:
        conn.close()


def turn_count(db: Path) -> int:
    try:
        return rows(db, "SELECT count(*) FROM turns")[0][0]
    except apsw.Error:  # the file is there before its tables are
        return 0


def rejects(path: str | None) -> list[tuple[str, str]]:
    """A run's rejects: each one's file and reason."""
    if path is None:
        return []
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return sorted((Path(r["path"]).name, r["reason"]) for r in records)


def killed_part_way(args: list[str], work: Path, db: Path, turns: int) -> tuple[int, float]:
    """Start the backfill, SIGKILL it once ``turns`` are in; the turns it had committed."""
    started = time.perf_counter()
    victim = subprocess.Popen([sys.executable, "-m", "mempipe", *args], cwd=work)
    while turn_count(db) < turns:
        if victim.poll() is not None:
            raise SystemExit(f"the backfill ended (exit {victim.returncode}) before the kill")
        time.sleep(0.2)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    return turn_count(db), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--rejects-every", type=int, default=1000)
    parser.add_argument("--kill-at", type=float, default=0.5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = work / "archive"
        write_files(folder, options.files, options.rejects_every)
        expected_rejects = len(range(0, options.files, options.rejects_every))
        whole, killed = work / "whole.db", work / "killed.db"

        def backfill(db: Path, rejects_dir: str) -> list[str]:
            store, out = f"sqlite:///{db}", str(work / rejects_dir)
            return ["backfill", str(folder), "--store", store, "--rejects-dir", out, "--json"]

        with session_server(work):
            uninterrupted = run_mempipe(backfill(whole, "whole-rejects"), work)
            wanted = int(2 * options.files * options.kill_at)
            kept, lived = killed_part_way(backfill(killed, "killed-rejects"), work, killed, wanted)
            rerun = run_mempipe(backfill(killed, "killed-rejects"), work)
        first, again = json.loads(uninterrupted.stdout), json.loads(rerun.stdout)
        assert again["files_read"] == first["files_read"] == options.files
        assert again["duplicates_skipped"] == kept, "what the killed run committed is kept"
        assert again["turns_inserted"] + kept == first["turns_inserted"] == 2 * options.files
        assert again["rejected"] == first["rejected"] == expected_rejects
        assert rejects(again["rejects_path"]) == rejects(first["rejects_path"])
        assert rows(killed, TURNS) == rows(whole, TURNS), "the same turns, promoted alike"
        assert rows(killed, SNAPSHOTS) == rows(whole, SNAPSHOTS), "the same snapshots"
        snapshots = len(rows(whole, SNAPSHOTS))

    print(f"files: {options.files:,}, a reject every {options.rejects_every:,}")
    whole_run = f"{uninterrupted.seconds:.1f} s, peak RSS {uninterrupted.peak_rss_mb:.0f} MB"
    print(f"uninterrupted: {whole_run}")
    print(f"killed after {lived:.1f} s with {kept:,} turns committed; rerun {rerun.seconds:.1f} s")
    print(
        f"end state equal: {2 * options.files:,} turns, {snapshots:,} snapshots, "
        f"{expected_rejects:,} rejects, every file accounted for once"
    )


if __name__ == "__main__":
    main()
