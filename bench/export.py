"""A ChatGPT export of real text, loaded by ``mempipe backfill`` as a whole process, against a
minimal reader of the same file measured in the same run.

    python bench/export.py [--turns 200000]

The export is written in ChatGPT's ``conversations.json`` shape (a JSON array of conversations,
each a ``mapping`` of message nodes) from the LongMemEval development set's real sessions,
repeated until ``--turns`` turns. Measured, each in its own process: wall time and peak RSS of
``mempipe backfill`` on a fresh store (reporting to mempipe's session server, started
beforehand as for any command after a session's first), and of two references:

* minimal: ijson streaming the same array, walking each conversation's nodes and inserting
  (session, seq, role, text) rows into a SQLite table with an FTS5 index through apsw, in
  transactions of 5,000 rows, with no validation, identity, rejects or promotion;
* same rows: what any implementation of mempipe's schema must write, and nothing else — turns
  with their identity key and by-user index, the stemmed FTS5 index of speaker and text, and
  one snapshot per session cut as the promotion cuts (20 turns, or a 30-minute pause), each
  turn written once with its snapshot's id (the cut is known as the conversation is read).
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import orjson
from processes import run_mempipe, session_server

DATA = Path(
    os.environ.get(
        "MEMPIPE_LONGMEMEVAL", Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
    )
)

READER = r"""
import resource, sys, time
import apsw, ijson

started = time.perf_counter()
conn = apsw.Connection(sys.argv[2])
conn.execute("PRAGMA journal_mode = WAL")
conn.execute("PRAGMA synchronous = NORMAL")

def conversations():
    with open(sys.argv[1], "rb") as f:
        yield from ijson.items(f, "item", use_float=True)

def messages(conversation):
    # (role, text, time) of each message with text on the current branch, oldest first
    nodes = conversation["mapping"]
    node = nodes[conversation["current_node"]]
    chain = []
    while node is not None:
        chain.append(node)
        node = nodes.get(node["parent"]) if node["parent"] else None
    for node in reversed(chain):
        message = node["message"]
        if message and message["content"]["parts"]:
            text = "".join(p for p in message["content"]["parts"] if isinstance(p, str))
            yield message["author"]["role"], text, message["create_time"]

def write(insert, indexed, rows, *also):
    # the rows, their text index and any (statement, rows) beside them, in one transaction
    with conn:
        before = conn.execute("SELECT coalesce(max(id), 0) FROM turns").fetchall()[0][0]
        conn.executemany(insert, rows)
        conn.execute(
            f"INSERT INTO turns_fts (rowid, {indexed}) SELECT id, {indexed} FROM turns "
            "WHERE id > ?",
            (before,),
        )
        for statement, more in also:
            conn.executemany(statement, more)
    return len(rows)

def done(total):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(total, time.perf_counter() - started, peak)
"""

REFERENCE = (
    READER
    + r"""
conn.execute(
    "CREATE TABLE turns (id INTEGER PRIMARY KEY, session_id TEXT, seq INTEGER, role TEXT, "
    "content TEXT, UNIQUE (session_id, seq))"
)
conn.execute(
    "CREATE VIRTUAL TABLE turns_fts USING fts5(content, content='turns', content_rowid='id')"
)
insert = "INSERT INTO turns (session_id, seq, role, content) VALUES (?, ?, ?, ?)"
rows, total = [], 0
for conversation in conversations():
    for seq, (role, text, _) in enumerate(messages(conversation)):
        rows.append((conversation["id"], seq, role, text))
    if len(rows) >= 5000:
        total, rows = total + write(insert, "content", rows), []
if rows:
    total += write(insert, "content", rows)
done(total)
"""
)


SAME_ROWS = (
    READER
    + r"""
conn.execute(
    "CREATE TABLE turns (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL, "
    "user_id TEXT, session_id TEXT NOT NULL, turn_seq INTEGER NOT NULL, role TEXT NOT NULL, "
    "name TEXT, content TEXT NOT NULL, created_at TEXT, snapshot_id TEXT)"
)
conn.execute(
    "CREATE UNIQUE INDEX turn_key ON turns "
    "(org_id, project_id, coalesce(user_id, ''), session_id, turn_seq)"
)
conn.execute("CREATE INDEX turns_by_user ON turns (user_id)")
conn.execute(
    "CREATE VIRTUAL TABLE turns_fts USING fts5(name, content, content='turns', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')"
)
conn.execute(
    "CREATE TABLE snapshots (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL, "
    "user_id TEXT, session_id TEXT NOT NULL, first_turn_seq INTEGER NOT NULL, "
    "last_turn_seq INTEGER NOT NULL, turn_count INTEGER NOT NULL)"
)
conn.execute(
    "CREATE UNIQUE INDEX snapshot_key ON snapshots "
    "(org_id, project_id, coalesce(user_id, ''), session_id, first_turn_seq)"
)
insert = (
    "INSERT INTO turns (org_id, project_id, user_id, session_id, turn_seq, role, name, content, "
    "created_at, snapshot_id) VALUES ('o', 'p', 'bench', ?, ?, ?, NULL, ?, ?, ?)"
)
cut = "INSERT INTO snapshots VALUES (?, 'o', 'p', 'bench', ?, ?, ?, ?)"
rows, snapshots, total = [], [], 0
for conversation in conversations():
    session, seq, first, last_time = conversation["id"], 0, 0, None
    for role, text, at in messages(conversation):
        if seq > first and (seq - first >= 20 or at - last_time > 1800):
            snapshots.append((f"{session}:{first}", session, first, seq - 1, seq - first))
            first = seq
        rows.append((session, seq, role, text, str(at), f"{session}:{first}"))
        seq, last_time = seq + 1, at
    if seq > first:
        snapshots.append((f"{session}:{first}", session, first, seq - 1, seq - first))
    if len(rows) >= 5000:
        total += write(insert, "name, content", rows, (cut, snapshots))
        rows, snapshots = [], []
if rows:
    total += write(insert, "name, content", rows, (cut, snapshots))
done(total)
"""
)


SAME_ROWS_VALIDATED = SAME_ROWS.replace(
    "rows, snapshots, total = [], [], 0",
    "from datetime import UTC, datetime\n"
    "from mempipe.schemas.turn import Turn\n"
    "rows, snapshots, total = [], [], 0",
).replace(
    """        rows.append((session, seq, role, text, str(at), f"{session}:{first}"))""",
    """        Turn.model_validate({"org_id": "o", "project_id": "p", "user_id": "bench", """
    """"session_id": session, "turn_seq": seq, "role": role, "content": text, """
    """"created_at": datetime.fromtimestamp(at, UTC), "source": {"path": sys.argv[1], """
    """"index": 0, "message_index": seq}})\n"""
    """        rows.append((session, seq, role, text, str(at), f"{session}:{first}"))""",
)
"""The same rows, each turn first made a :class:`mempipe.schemas.turn.Turn` (pydantic at the
boundary, as mempipe's reader does): what validation alone adds."""


def conversations(turns: int) -> Iterator[dict]:
    """LongMemEval's sessions as ChatGPT conversations, repeated, each under an id of its own
    (a session id can recur in the set)."""
    copy, written = 0, 0
    while True:
        session: list[dict] = []
        with gzip.open(DATA / "turns.jsonl.gz") as lines:
            for line in lines:
                turn = orjson.loads(line)
                if session and session[0]["session_id"] != turn["session_id"]:
                    yield conversation(session, f"{copy}.{written}")
                    written += len(session)
                    session = []
                    if written >= turns:
                        return
                session.append(turn)
        if session:
            yield conversation(session, f"{copy}.{written}")
            written += len(session)
            if written >= turns:
                return
        copy += 1


def conversation(session: list[dict], serial: str) -> dict:
    cid = f"{session[0]['session_id']}~{serial}"
    mapping: dict[str, dict] = {
        "root": {"id": "root", "message": None, "parent": None, "children": ["m0"]}
    }
    for n, turn in enumerate(session):
        created = datetime.fromisoformat(turn["created_at"].replace("Z", "+00:00")).timestamp()
        mapping[f"m{n}"] = {
            "id": f"m{n}",
            "parent": "root" if n == 0 else f"m{n - 1}",
            "children": [f"m{n + 1}"] if n + 1 < len(session) else [],
            "message": {
                "id": f"{cid}-m{n}",
                "author": {"role": turn["role"], "name": None, "metadata": {}},
                "create_time": created,
                "content": {"content_type": "text", "parts": [turn["content"]]},
                "metadata": {},
                "recipient": "all",
            },
        }
    return {
        "title": cid,
        "create_time": mapping["m0"]["message"]["create_time"],
        "conversation_id": cid,
        "id": cid,
        "current_node": f"m{len(session) - 1}",
        "mapping": mapping,
    }


def write_export(path: Path, turns: int) -> None:
    with path.open("wb") as out:
        out.write(b"[")
        for n, item in enumerate(conversations(turns)):
            out.write((b",\n" if n else b"\n") + orjson.dumps(item))
        out.write(b"\n]\n")


def mempipe_backfill(export: Path, work: Path) -> tuple[float, float]:
    store = f"sqlite:///{work / 'mempipe.db'}"
    done = run_mempipe(
        ["backfill", str(export), "--user-id", "bench", "--store", store, "--json"], work
    )
    print(f"mempipe: {orjson.loads(done.stdout)['turns_inserted']:,} turns inserted")
    return done.seconds, done.peak_rss_mb


def reference(export: Path, work: Path, script: str, name: str) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, str(export), str(work / f"{name}.db")],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - started
    total, _, peak = done.stdout.split()
    print(f"reference, {name}: {int(total):,} turns inserted")
    return seconds, int(peak)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        export = work / "conversations.json"
        write_export(export, args.turns)
        print(f"export: {export.stat().st_size / 1e6:,.0f} MB")
        ref_s, ref_rss = reference(export, work, REFERENCE, "minimal")
        same_s, same_rss = reference(export, work, SAME_ROWS, "same rows")
        valid_s, valid_rss = reference(export, work, SAME_ROWS_VALIDATED, "validated")
        with session_server(work):
            ours_s, ours_rss = mempipe_backfill(export, work)
        for name, seconds, peak in (
            ("reference: ijson + apsw + FTS5", ref_s, ref_rss),
            ("reference: the same rows", same_s, same_rss),
            ("reference: the same rows, validated", valid_s, valid_rss),
            ("mempipe backfill (whole process)", ours_s, ours_rss),
        ):
            print(f"{name:<36} {seconds:7.1f} s  peak RSS {peak:5.0f} MB")
        print(f"ratio minimal reader's time / mempipe's: {ref_s / ours_s:.2f}")
        print(f"ratio same-rows reader's time / mempipe's: {same_s / ours_s:.2f}")
        print(f"ratio same-rows reader's time / the validated one's: {same_s / valid_s:.2f}")


if __name__ == "__main__":
    main()
