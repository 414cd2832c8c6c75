"""Records of a JSON archive, whatever its container: JSON Lines, a JSON array (streamed item by
item), or a single JSON document."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

import ijson
import orjson

from mempipe.archives.streams import PrependedStream

_WHITESPACE = b" \t\r\n\xef\xbb\xbf"
_ENDED_EARLY = ("premature EOF", "Incomplete JSON content")
"""How ijson's backends (yajl2 C, pure Python) say the input ended inside the JSON."""
LOOKAHEAD_LINES = 1000
"""How far past broken first lines to look for a line that is a JSON object on its own."""


class JsonRecord(NamedTuple):
    """One record and where it was read (a tuple: one is made for every record of a file)."""

    value: Any
    line: int | None
    index: int | None
    text: bytes | None = None

    def raw(self) -> str:
        if self.text is not None:
            return self.text.decode("utf-8", errors="replace").rstrip("\r\n")
        return orjson.dumps(self.value, default=str).decode()


@dataclass(frozen=True, slots=True)
class BrokenRecord:
    """A line that is not JSON, or the point where a JSON array or document stops being valid.
    A ``fatal`` one ends the file: nothing after it can be read."""

    line: int | None
    index: int | None
    reason: str
    text: str
    fatal: bool = False
    offset: int | None = None


def iter_json_records(
    stream: BinaryIO, *, lines: bool = False, tell: Callable[[], int] | None = None
) -> Iterator[JsonRecord | BrokenRecord]:
    """``lines`` forces JSON Lines (a ``.jsonl`` file is read line by line whatever its first
    lines hold); ``tell`` gives the byte offset reached in the file, for messages."""
    head = _skip_whitespace(stream)
    if lines:
        yield from _lines(_replay(head, stream))
        return
    if head == b"[":
        yield from _array_items(_replay(head, stream), tell)
        return
    first_line = head + stream.readline()
    if _parses(first_line):
        yield from _lines(_replay(first_line, stream))
        return
    # Either JSON Lines whose first lines are broken, or one pretty-printed document. A JSON
    # Lines record starts at column 0 and is an object on its own; inside a pretty-printed
    # document only its opening and closing braces stand at column 0.
    consumed = [first_line]
    is_lines = False
    for _ in range(LOOKAHEAD_LINES):
        line = stream.readline()
        if not line:
            break
        consumed.append(line)
        if line[:1] == b"{" and _is_object(line):
            is_lines = True
            break
    replay = _replay(b"".join(consumed), stream)
    yield from _lines(replay) if is_lines else _single_document(replay, tell)


def _replay(head: bytes, rest: BinaryIO) -> BinaryIO:
    return io.BufferedReader(PrependedStream(head, rest), buffer_size=1 << 16)  # type: ignore[return-value]


def _parses(text: bytes) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def _is_object(text: bytes) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def _skip_whitespace(stream: BinaryIO) -> bytes:
    while True:
        byte = stream.read(1)
        if not byte or byte not in _WHITESPACE:
            return byte


def _lines(stream: BinaryIO) -> Iterator[JsonRecord | BrokenRecord]:
    for number, text in enumerate(stream, start=1):
        if not text.strip():
            continue
        try:
            yield JsonRecord(orjson.loads(text), line=number, index=None, text=text)
        except orjson.JSONDecodeError as exc:
            raw = text.decode("utf-8", errors="replace").rstrip("\r\n")
            yield BrokenRecord(number, None, f"not valid JSON: {exc}", raw)


def _array_items(
    stream: BinaryIO, tell: Callable[[], int] | None
) -> Iterator[JsonRecord | BrokenRecord]:
    index = -1
    try:
        for index, value in enumerate(ijson.items(stream, "item", use_float=True)):
            yield JsonRecord(value, line=None, index=index)
    except ijson.JSONError as exc:
        yield _stopped(stream, tell, index + 1, "the JSON array", exc)


def _single_document(
    stream: BinaryIO, tell: Callable[[], int] | None
) -> Iterator[JsonRecord | BrokenRecord]:
    try:
        for value in ijson.items(stream, "", use_float=True):
            yield JsonRecord(value, line=None, index=0)
    except ijson.JSONError as exc:
        yield _stopped(stream, tell, 0, "the JSON document", exc)


def _stopped(
    stream: BinaryIO, tell: Callable[[], int] | None, index: int, what: str, exc: Exception
) -> BrokenRecord:
    """Why the rest of a file cannot be read: the file ended inside the JSON (truncated), or
    the JSON is malformed from this record on."""
    offset = tell() if tell is not None else None
    ended = any(sign in str(exc) for sign in _ENDED_EARLY)
    at_end = ended and not stream.read(1)
    where = f" at byte {offset}" if offset is not None else ""
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    reason = (
        f"truncated{where}: the file ends inside {what} (record {index})"
        if at_end
        else f"{what} is malformed from record {index} on (read up to byte {offset}): {detail}"
    )
    return BrokenRecord(None, index, reason, "", fatal=True, offset=offset)
