"""What the crash and concurrency tests share: an archive whose every owner's facts change
month by month, the CLI as a real process, and readers of a store's end state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import apsw
import sqlite_vec

AIRPORTS = ["MAD", "SYD", "YYZ", "LIS", "JFK", "NRT", "CDG", "GRU", "CPT", "AKL"]
CITIES = ["Madrid", "Sydney", "Toronto", "Lisbon", "Boston", "Tokyo", "Paris", "Recife"]
MONTHS = 6
MEMORY_TABLES = ("semantic", "episodic", "procedural", "taxonomic")


def airport(user: int, month: int) -> str:
    return AIRPORTS[(user * 3 + month * 7) % len(AIRPORTS)]


def city(user: int, month: int) -> str:
    return CITIES[(user * 5 + month * 3) % len(CITIES)]


def write_archive(path: Path, users: int) -> None:
    """One session a month per user; each month the home airport and city change."""
    lines = []
    for user in range(users):
        for month in range(MONTHS):
            session = f"u{user:03d}-m{month}"
            at = f"2024-{month + 1:02d}-10T09:00:00Z"
            lines.append(
                {
                    "session_id": session,
                    "turn_seq": 0,
                    "role": "user",
                    "content": f"My home airport is {airport(user, month)}. "
                    f"I live in {city(user, month)}. I prefer aisle seats on short flights.",
                    "created_at": at,
                    "user_id": f"user{user:03d}",
                },
            )
            lines.append(
                {
                    "session_id": session,
                    "turn_seq": 1,
                    "role": "assistant",
                    "content": "Noted, I have updated your travel profile.",
                    "created_at": at.replace("09:00:00", "09:00:30"),
                    "user_id": f"user{user:03d}",
                }
            )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def write_config(folder: Path, model: str = "hashing-64") -> Path:
    path = folder / "project-config.yaml"
    handlers = "[semantic, episodic, procedural, taxonomic]"
    path.write_text(
        "org_id: acme\nproject_id: travel\nmemory:\n  extraction:\n"
        f"    enabled: {handlers}\n  embedding:\n    model: {model}\n"
    )
    return path


def prompted(folder: Path, users: int, prompt: str) -> tuple[Path, Path]:
    """An archive of ``users`` users and a configuration whose semantic prompt is a file,
    written; returns the configuration and the prompt file."""
    write_archive(folder / "archive.jsonl", users)
    config = write_config(folder)
    config.write_text(
        config.read_text().replace(
            "  extraction:\n", "  extraction:\n    prompts:\n      semantic: {file: semantic.txt}\n"
        )
    )
    (folder / "semantic.txt").write_text(prompt)
    return config, folder / "semantic.txt"


def environment(api_url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return {**env, **extra}


def start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "mempipe", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    process = start(args, cwd, env)
    out, err = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def read(db: Path, query: str) -> list[tuple]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.setbusytimeout(10_000)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def gone(pid: int) -> bool:
    """The process has ended: no such process, or a zombie its parent has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def left_behind(pids: set[int], within: float = 60) -> set[int]:
    """Those of the processes still running once ``within`` seconds have passed (or none)."""
    deadline = time.monotonic() + within
    while (alive := {pid for pid in pids if not gone(pid)}) and time.monotonic() < deadline:
        time.sleep(0.5)
    return alive


def kill_when(process: subprocess.Popen, ready, timeout: float = 240) -> None:
    """SIGKILL ``process`` as soon as ``ready()`` holds; fail if it ended first."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"ended before the kill: {process.communicate()}"
        assert time.monotonic() < deadline, "never got there"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()


def memories(db: Path) -> set[tuple]:
    """Every version of every memory, with its links, count and evidence."""
    rows: set[tuple] = set()
    for kind in MEMORY_TABLES:
        rows |= {
            (kind, *row[:-1], tuple(sorted(json.loads(row[-1]))))
            for row in read(
                db,
                f"SELECT id, text, status, version, supersedes_id, reinforcement_count, "
                f"evidence FROM memories_{kind}",
            )
        }
    return rows


def audit(db: Path) -> Counter:
    """What reconciliation did, over every run: the same in any interleaving of runs."""
    return Counter(
        read(
            db,
            "SELECT memory_type, action, memory_id, version, superseded_id, snapshot_id FROM audit",
        )
    )


def current_airports(db: Path) -> dict[str, str]:
    return {
        user: text.rsplit(" ", 1)[-1].rstrip(".")
        for user, text in read(
            db,
            "SELECT user_id, text FROM memories_semantic WHERE status = 'active' "
            "AND text LIKE '%home airport%'",
        )
    }


def extraction_counts(db: Path) -> Counter:
    return Counter(dict(read(db, "SELECT status, count(*) FROM snapshot_extractions GROUP BY 1")))


def copy_store(source: Path, target: Path) -> None:
    """A consistent copy of a store (its WAL included), through SQLite's backup API."""
    src = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
    dest = apsw.Connection(str(target))
    try:
        with dest.backup("main", src, "main") as backup:
            backup.step()
    finally:
        dest.close()
        src.close()
