"""Small readers and builders shared by tests."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import sqlite_vec
from click.testing import CliRunner, Result

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.archive import ArchiveFormat, IngestRequest
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.summaries import IngestSummary
from mempipe.schemas.transcript import SnapshotContent, TurnLine
from mempipe.schemas.turn import SourceLocation, Turn
from mempipe.services.backfill.ingest import ingest_file
from mempipe.services.report.audit import scan_audit

AIRPORT_SNAPSHOT = SnapshotContent(
    snapshot_id="snap_1",
    org_id="o",
    project_id="p",
    user_id="u",
    session_id="s",
    turns=[TurnLine(role="user", content="My home airport is LIS now.")],
)
"""One user turn with one fact, for an extractor to find."""
AIRPORT_FACT = {"text": "User's home airport is LIS.", "label": "home_airport"}
"""That fact as an extractor answers it."""


def audit_actions(audit_dir: Path) -> Counter:
    """(memory type, action, text) of every audit row, counted: what two runs must agree on."""
    frame = scan_audit(audit_dir).collect()
    return Counter(zip(frame["memory_type"], frame["action"], frame["text"], strict=True))


def semantic_memory(memory_id: str, text: str, user: str, **fields: Any) -> SemanticMemory:
    """A semantic memory of org ``o``, project ``p``, as written on 2024-01-01."""
    at = datetime(2024, 1, 1, tzinfo=UTC)
    return SemanticMemory(
        id=memory_id,
        org_id="o",
        project_id="p",
        user_id=user,
        text=text,
        label=fields.pop("label", memory_id),
        created_at=at,
        updated_at=at,
        **fields,
    )


def ingest(
    store: Any,
    path: Path,
    defaults: IdentityDefaults,
    rejects: Path,
    *,
    format: str = ArchiveFormat.AUTO,
    run_id: str = "r",
    **more: Any,
) -> IngestSummary:
    """One archive file ingested into ``store`` as the backfill's ingest reads it."""
    request = IngestRequest(
        path=path, format=format, defaults=defaults, run_id=run_id, rejects_file=rejects, **more
    )
    return ingest_file(UnitOfWork(store), request)


def noisy_lines(stderr: str) -> str:
    """What a command that succeeded printed on stderr besides its progress bars: nothing is
    expected (no traceback, no exception text, no warning of Prefect's)."""
    return "\n".join(line for line in stderr.splitlines() if line.strip() and "━" not in line)


def invoke(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str | None] | None = None,
    input: str | None = None,
) -> Result:
    """``mempipe ARGS`` in this process, as sqlite-utils tests its CLI: click's runner, stdout
    and stderr apart, in ``cwd``; ``env``, variables set for this call only. Flows run against
    the session's Prefect test server (the ``prefect_server`` fixture). The environment is left
    as it was found, as a command of its own would leave it (a quiet command sets Prefect's
    console level in its process)."""
    from mempipe.cli import cli

    saved = dict(os.environ)
    try:
        with contextlib.chdir(cwd or Path.cwd()):
            return CliRunner().invoke(cli, list(args), env=env, input=input, catch_exceptions=False)
    finally:
        os.environ.clear()
        os.environ.update(saved)


# An archive whose every owner's facts change month by month, and readers of a store's end
# state: what the crash and concurrency tests compare with an uninterrupted run's.

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


def read(db: Path, query: str) -> list[tuple]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.setbusytimeout(10_000)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def vectors_of(db: Path, model: str) -> int:
    tables = read(
        db,
        "SELECT vector_table FROM embedding_registry "
        f"WHERE collection = 'stm' AND model_id = '{model}'",
    )
    return read(db, f"SELECT count(*) FROM {tables[0][0]}")[0][0] if tables else 0


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


def write_named_archive(path: Path, users: int) -> None:
    """One session per user whose text names the user, so the endpoint can tell them apart."""
    lines = []
    for user in range(users):
        name = f"user{user:03d}"
        lines.append(
            {
                "session_id": f"{name}-s",
                "turn_seq": 0,
                "role": "user",
                "content": f"I am {name}. My home airport is {airport(user, 0)}.",
                "created_at": "2024-01-10T09:00:00Z",
                "user_id": name,
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


# The secrets tests' user: every text of theirs carries MARK, which must be gone after an erase.
USER = "zoe"
MARK = "Quillfeather" + secrets.token_hex(4)
"""In every text of the erased user, and nowhere else: what must be gone after the erase."""


def write_marked_archive(path: Path) -> list[str]:
    """Two sessions of the erased user, one of another user (its own id: a backfill takes it with
    ``--identity record``), and a bad record of the user."""
    texts = []
    lines = []
    for session in range(2):
        for seq in range(2):
            text = f"My locker code is {MARK}-{session}{seq} and I live on Marigold Lane."
            texts.append(text)
            lines.append(
                {
                    "session_id": f"s{session}",
                    "turn_seq": seq,
                    "role": "user",
                    "content": text,
                    "created_at": f"2024-03-0{session + 1}T10:00:0{seq}Z",
                }
            )
    lines.append(
        {
            "session_id": "other",
            "turn_seq": 0,
            "role": "user",
            "content": "I prefer aisle seats.",
            "created_at": "2024-03-05T10:00:00Z",
            "user_id": "ann",
        }
    )
    body = "".join(json.dumps(line) + "\n" for line in lines)
    path.write_text(body + f'{{"session_id": "s9", "content": "{MARK} with no role"}}\n')
    return texts


def make_turn(seq: int, content: str = "hello", session: str = "s") -> Turn:
    return Turn(
        org_id="o",
        project_id="p",
        session_id=session,
        turn_seq=seq,
        role="user",
        content=f"{content} {seq}",
        source=SourceLocation(path="a.jsonl", line=seq + 1),
    )
