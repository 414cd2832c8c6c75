"""Records of a JSON archive, whatever its container: JSON Lines, a JSON array (streamed item by
item), or a single JSON document."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import ijson
import orjson

from mempipe.archives.streams import PrependedStream

_WHITESPACE = b" \t\r\n\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class JsonRecord:
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
    """A line that is not JSON, or the point where a JSON array stops being valid."""

    line: int | None
    index: int | None
    reason: str
    text: str


def iter_json_records(stream: BinaryIO) -> Iterator[JsonRecord | BrokenRecord]:
    head = _skip_whitespace(stream)
    if head == b"[":
        yield from _array_items(_replay(head, stream))
        return
    first_line = head + stream.readline()
    if _parses(first_line):
        yield from _lines(_replay(first_line, stream))
        return
    # Either a JSON Lines file whose first line is broken, or one pretty-printed document:
    # the next non-blank line tells, since a fragment of a document is not JSON on its own.
    consumed = [first_line]
    while (line := stream.readline()) and not line.strip():
        consumed.append(line)
    consumed.append(line)
    replay = _replay(b"".join(consumed), stream)
    if line and _parses(line):
        yield from _lines(replay)
    else:
        yield from _single_document(replay)


def _replay(head: bytes, rest: BinaryIO) -> BinaryIO:
    return io.BufferedReader(PrependedStream(head, rest), buffer_size=1 << 16)  # type: ignore[return-value]


def _parses(text: bytes) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


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


def _array_items(stream: BinaryIO) -> Iterator[JsonRecord | BrokenRecord]:
    index = -1
    try:
        for index, value in enumerate(ijson.items(stream, "item", use_float=True)):
            yield JsonRecord(value, line=None, index=index)
    except ijson.JSONError as exc:
        yield BrokenRecord(
            None, index + 1, f"the JSON array is malformed from this record on: {exc}", ""
        )


def _single_document(stream: BinaryIO) -> Iterator[JsonRecord | BrokenRecord]:
    try:
        for value in ijson.items(stream, "", use_float=True):
            yield JsonRecord(value, line=None, index=0)
    except ijson.JSONError as exc:
        yield BrokenRecord(1, None, f"not valid JSON: {exc}", "")
