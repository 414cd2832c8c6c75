"""SQL for the SQLite store, as constants and pure builders testable without a database."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, date, datetime
from enum import Enum
from operator import attrgetter
from typing import Any, get_args, get_origin

import orjson
from pydantic import BaseModel

from mempipe.domain.promotion import TurnStamp
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.snapshot import Snapshot
from mempipe.schemas.turn import TURN_FIELDS, SourceLocation, Turn

MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS _migrations "
    "(id TEXT PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
)

TURN_COLUMNS = (
    *TURN_FIELDS,
    *(f"source_{field}" for field in SourceLocation.model_fields),
    "run_id",
)
"""The turns table's written columns, from the turn model."""


def _from_json_rows(columns: tuple[str, ...]) -> str:
    """The columns of each row of a JSON array of rows, bound as the statement's last value."""
    values = ", ".join(f"value ->> {i}" for i in range(len(columns)))
    return f"({', '.join(columns)}) SELECT {values} FROM json_each(?) WHERE true"


INSERT_TURNS = f"INSERT INTO turns {_from_json_rows(TURN_COLUMNS)} ON CONFLICT DO NOTHING"
"""A batch of turn rows in one statement, from one JSON array of rows: SQLite runs the whole
batch in one step without Python's lock, so the writer thread truly overlaps the parsing thread
(``executemany`` takes the lock back for every row, and so runs in turn with it)."""
MAX_TURN_ID = "SELECT coalesce(max(id), 0) FROM turns"
INSERTED_BY_FILE = "SELECT source_path, count(*) FROM turns WHERE id > ? GROUP BY source_path"
SYNC_TURNS_FTS = (
    "INSERT INTO turns_fts (rowid, name, content) SELECT id, name, content FROM turns WHERE id > ?"
)
STORED_TURN_BY_KEY = (
    "SELECT ?, id, role, content, source_path, source_line, source_index FROM turns "
    "WHERE org_id = ? AND project_id = ? AND coalesce(user_id, '') = ? AND session_id = ? "
    "AND turn_seq = ?"
)

_STAMP_COLUMNS = (
    "org_id, project_id, coalesce(user_id, ''), session_id, turn_seq, created_at, role, "
    "content, user_id, agent_id"
)
TURN_KEY = "org_id, project_id, coalesce(user_id, ''), session_id, turn_seq"
"""A turn's identity: two users may reuse a session id; a missing user is one of its own."""


def unpromoted_page_sql(after_key: bool) -> str:
    """One page of unpromoted turns in key order, starting after the last key seen (keyset
    paging on the partial index, so pages stay cheap however many turns are promoted)."""
    after = f"AND ({TURN_KEY}) > (?, ?, ?, ?, ?) " if after_key else ""
    return (
        f"SELECT {_STAMP_COLUMNS} FROM turns WHERE snapshot_id IS NULL {after}"
        f"ORDER BY {TURN_KEY} LIMIT ?"
    )


SNAPSHOT_COLUMNS = (
    *("id", "org_id", "project_id", "user_id", "agent_id", "session_id", "first_turn_seq"),
    *("last_turn_seq", "turn_count", "started_at", "ended_at", "cut_reason", "summary"),
    *("run_id", "created_at"),
)
NEW_SNAPSHOT_IDS = (
    "SELECT json_group_array(value ->> 0) FROM json_each(?) "
    "WHERE NOT EXISTS (SELECT 1 FROM snapshots WHERE id = value ->> 0)"
)
INSERT_SNAPSHOTS = (
    f"INSERT INTO snapshots {_from_json_rows(SNAPSHOT_COLUMNS)} ON CONFLICT DO NOTHING"
)
INSERT_EXTRACTION_STATES = (
    "INSERT INTO snapshot_extractions "
    + _from_json_rows(
        (
            "snapshot_id",
            "handler",
            "status",
            "attempts",
            "last_error",
            "extractor",
            "prompt_version",
            "updated_at",
        )
    )
    + " ON CONFLICT DO NOTHING"
)
MARK_TURNS_PROMOTED = (
    "UPDATE turns SET snapshot_id = s.value ->> 0 FROM json_each(?) AS s "
    "WHERE turns.org_id = s.value ->> 1 AND turns.project_id = s.value ->> 2 "
    "AND coalesce(turns.user_id, '') = coalesce(s.value ->> 3, '') "
    "AND turns.session_id = s.value ->> 4 "
    "AND turns.turn_seq BETWEEN s.value ->> 5 AND s.value ->> 6 AND turns.snapshot_id IS NULL"
)
"""Snapshots, their extraction states and their turns' marks, each a batch in one statement
from a JSON array of rows (see :data:`INSERT_TURNS`)."""

UPSERT_RUN = (
    "INSERT INTO runs (run_id, flow, parameters, status, counts, checkpoints, error, started_at, "
    "finished_at, host, pid, machine, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
    "parameters = excluded.parameters, started_at = excluded.started_at, host = excluded.host, "
    "pid = excluded.pid, machine = excluded.machine, heartbeat_at = excluded.heartbeat_at"
)
FINISH_RUN = "UPDATE runs SET status = ?, counts = ?, error = ?, finished_at = ? WHERE run_id = ?"
SELECT_RUNS = (
    "SELECT run_id, flow, parameters, status, counts, checkpoints, error, started_at, "
    "finished_at, host, pid, machine, heartbeat_at FROM runs"
)
SELECT_RUN = f"{SELECT_RUNS} WHERE run_id = ?"

SNAPSHOT_STATES = """
SELECT state, count(*) FROM (
    SELECT CASE
             WHEN sum(e.status = 'failed_content') > 0 THEN 'failed_content'
             WHEN sum(e.status = 'failed_retryable') > 0 THEN 'failed_retryable'
             WHEN sum(e.status = 'pending') > 0 OR count(e.handler) = 0 THEN 'pending'
             ELSE 'done'
           END AS state
    FROM snapshots s LEFT JOIN snapshot_extractions e ON e.snapshot_id = s.id
    GROUP BY s.id
) GROUP BY state
"""


def iso(value: datetime | None) -> str | None:
    """Fixed-width UTC ISO text, so that text order is time order."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.isoformat(timespec="microseconds")


def parse_iso(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def to_sql(value: Any) -> Any:
    """A model field's value as SQLite stores it: times as fixed-width UTC text, days as ISO
    dates, enums by value, booleans as 0/1, lists and dicts as JSON."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list | dict):
        return orjson.dumps(value).decode()
    return value


def stored_as_json(annotation: Any) -> bool:
    """Lists and dicts are JSON text in SQLite (:func:`to_sql`)."""
    for candidate in (annotation, *get_args(annotation)):
        if candidate in (list, dict) or get_origin(candidate) in (list, dict):
            return True
    return False


@functools.cache
def _json_fields(model: type[BaseModel]) -> tuple[frozenset[str], frozenset[str]]:
    """A model's fields held as JSON text, and those of them with a default (empty) value."""
    fields = model.model_fields
    held = frozenset(n for n, f in fields.items() if stored_as_json(f.annotation))
    return held, frozenset(n for n in held if fields[n].default_factory is not None)


def from_sql_row(model: type[BaseModel], names: tuple[str, ...], row: tuple[Any, ...]) -> dict:
    """A row's values as the model takes them: JSON text columns parsed, a NULL that stands for
    an empty dict or list left to the model's default."""
    held, defaulted = _json_fields(model)
    fields: dict[str, Any] = {}
    for name, value in zip(names, row, strict=True):
        if name in held:
            if value is None and name in defaulted:
                continue
            if isinstance(value, str):
                value = orjson.loads(value)
        fields[name] = value
    return fields


def json_key(name: str) -> str:
    """A JSON path naming one key of an object, whatever characters the key holds."""
    return "$." + orjson.dumps(name).decode()


def json_or_none(value: Any) -> str | None:
    return orjson.dumps(value).decode() if value else None


_OWN = attrgetter(*TURN_FIELDS)
_SOURCE = attrgetter(*SourceLocation.model_fields)
_CONVERTED: tuple[tuple[int, Callable[[Any], Any]], ...] = (
    (TURN_FIELDS.index("role"), lambda role: role.value),
    (TURN_FIELDS.index("created_at"), iso),
    (TURN_FIELDS.index("tool_calls"), json_or_none),
    (TURN_FIELDS.index("metadata"), json_or_none),
)
"""The turn fields SQLite stores in another form than the model holds them, by position."""


def turn_row(turn: Turn, run_id: str | None) -> tuple[Any, ...]:
    """A turn's values in :data:`TURN_COLUMNS` order."""
    own = list(_OWN(turn))
    for position, convert in _CONVERTED:
        own[position] = convert(own[position])
    return (*own, *_SOURCE(turn.source), run_id)


def stamp_from_row(row: tuple[Any, ...]) -> TurnStamp:
    org, project, _, session, seq, created, role, content, user, agent = row
    return TurnStamp(org, project, session, seq, parse_iso(created), role, content, user, agent)


def snapshot_row(snapshot: Snapshot, now: str) -> tuple[Any, ...]:
    return (
        snapshot.snapshot_id,
        snapshot.org_id,
        snapshot.project_id,
        snapshot.user_id,
        snapshot.agent_id,
        snapshot.session_id,
        snapshot.first_turn_seq,
        snapshot.last_turn_seq,
        snapshot.turn_count,
        iso(snapshot.started_at),
        iso(snapshot.ended_at),
        snapshot.cut_reason.value,
        snapshot.summary,
        snapshot.run_id,
        now,
    )


def selection_where(selection: SnapshotSelection) -> tuple[str, list[Any]]:
    """A WHERE clause over snapshots ``s`` for a selection; every given field is ANDed."""
    clauses, values = ["1 = 1"], []
    for column in ("org_id", "project_id", "user_id", "session_id"):
        value = getattr(selection, column)
        if value is not None:
            clauses.append(f"s.{column} = ?")
            values.append(value)
    if selection.snapshot_ids:
        clauses.append(f"s.id IN ({', '.join('?' for _ in selection.snapshot_ids)})")
        values.extend(selection.snapshot_ids)
    if selection.since is not None:
        clauses.append("coalesce(s.ended_at, s.created_at) >= ?")
        values.append(iso(selection.since))
    if selection.until is not None:
        clauses.append("coalesce(s.started_at, s.created_at) < ?")
        values.append(iso(selection.until))
    return " AND ".join(clauses), values
