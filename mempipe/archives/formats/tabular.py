"""CSV and Parquet archives: one row per turn, columns mapped to turn fields.

Columns are found by the turn field's own name or a common alias (``conversation_id`` for
``session_id``, ``speaker`` for ``role``, ``text`` for ``content``, ...); ``--column
FIELD=COLUMN`` names them explicitly. Rows without ``turn_seq`` are numbered per session in file
order, as in the canonical format.
"""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, BinaryIO

import orjson

from mempipe.archives.drafts import Draft, Location, location
from mempipe.archives.formats import ClaimedFormat, FileReading
from mempipe.archives.paths import logical_suffix
from mempipe.errors import ArchiveError
from mempipe.schemas.archive import ArchiveFormat, FormatKind
from mempipe.schemas.turn import TURN_FIELDS

COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "session_id": ("conversation_id", "thread_id", "session", "conversation"),
    "turn_seq": ("seq", "turn", "turn_index", "position", "message_index"),
    "role": ("sender", "author", "from"),
    "name": ("speaker", "speaker_name", "author_name", "sender_name"),
    "content": ("text", "message", "body", "value"),
    "created_at": ("timestamp", "time", "created", "ts", "date"),
    "message_id": ("msg_id", "id", "uuid"),
}
REQUIRED = ("session_id", "role", "content")
JSON_FIELDS = ("tool_calls", "metadata")


class ColumnMappingError(ValueError):
    """The file's columns cannot supply the turn fields: the whole file is rejected."""


def resolve_columns(header: Sequence[str], explicit: Mapping[str, str]) -> dict[str, str]:
    """Turn field -> column name, from the explicit mapping first, then names and aliases. A
    ``speaker`` column names the speaker where another column gives the role, and is the role
    where none does (``speaker: user``)."""
    unknown_fields = set(explicit) - set(TURN_FIELDS)
    if unknown_fields:
        raise ColumnMappingError(f"not turn fields: {', '.join(sorted(unknown_fields))}")
    columns = set(header)
    resolved: dict[str, str] = {}
    for field, column in explicit.items():
        if column not in columns:
            raise ColumnMappingError(f"column {column!r} (for {field}) is not in the file")
        resolved[field] = column
    taken = set(resolved.values())
    for field in TURN_FIELDS:
        if field in resolved:
            continue
        for candidate in (field, *COLUMN_ALIASES.get(field, ())):
            if candidate in columns and candidate not in taken:
                resolved[field] = candidate
                taken.add(candidate)
                break
    if "role" not in resolved and resolved.get("name") == "speaker" and "name" not in explicit:
        resolved["role"] = resolved.pop("name")
    missing = [f for f in REQUIRED if f not in resolved]
    if missing:
        hint = " ".join(f"--column {f}=COLUMN" for f in missing)
        raise ColumnMappingError(f"no column for {', '.join(missing)}; name it with {hint}")
    return resolved


class RowDrafts:
    """Rows (as dicts) to drafts, numbering sessions' turns when the file gives no turn_seq."""

    def __init__(self, path: str, columns: dict[str, str]) -> None:
        self.path = path
        self.columns = columns
        self._next_seq: dict[tuple[object, ...], int] = {}

    def draft(self, row: Mapping[str, Any], source: Location) -> Draft:
        fields: dict[str, Any] = {}
        for field, column in self.columns.items():
            value = row.get(column)
            if value is None or value == "":
                continue
            if field in JSON_FIELDS and isinstance(value, str):
                with contextlib.suppress(orjson.JSONDecodeError):
                    value = orjson.loads(value)
            fields[field] = value
        if fields.get("turn_seq") is None:
            key = (fields.get("org_id"), fields.get("project_id"), fields.get("session_id"))
            fields["turn_seq"] = self._next_seq.get(key, 0)
            self._next_seq[key] = fields["turn_seq"] + 1
        return Draft(fields, source, dict(row))


def csv_drafts(
    stream: BinaryIO, path: str, explicit: Mapping[str, str], delimiter: str
) -> Iterator[Draft]:
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace", newline="")
    reader = csv.DictReader(text, delimiter=delimiter)
    drafts = RowDrafts(path, resolve_columns(reader.fieldnames or [], explicit))
    for row in reader:
        yield drafts.draft(row, location(path, line=reader.line_num))


def parquet_drafts(path: str, explicit: Mapping[str, str]) -> Iterator[Draft]:
    """A Parquet file's rows; a file Arrow cannot read is an :class:`ArchiveError` with Arrow's
    words. pyarrow is imported here: a backfill of JSON or CSV does not pay for it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        drafts = RowDrafts(path, resolve_columns(parquet.schema_arrow.names, explicit))
        index = 0
        for batch in parquet.iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                yield drafts.draft(row, location(path, index=index))
                index += 1
    except pa.ArrowException as exc:
        raise ArchiveError(str(exc)) from exc


class Csv(ClaimedFormat):
    """CSV (and tab-separated ``.tsv``) files, one row per turn."""

    format = ArchiveFormat.CSV
    kind = FormatKind.TURNS
    suffixes = (".csv", ".tsv")

    def drafts(self, reading: FileReading) -> Iterator[Draft]:
        assert reading.stream is not None
        delimiter = "\t" if logical_suffix(reading.path) == ".tsv" else ","
        yield from csv_drafts(reading.stream.stream, self.path, reading.columns, delimiter)


class Parquet(ClaimedFormat):
    """Parquet files, one row per turn, read from the path (Arrow reads its own pages)."""

    format = ArchiveFormat.PARQUET
    kind = FormatKind.TURNS
    suffixes = (".parquet",)
    streamed = False

    def drafts(self, reading: FileReading) -> Iterator[Draft]:
        yield from parquet_drafts(self.path, reading.columns)
