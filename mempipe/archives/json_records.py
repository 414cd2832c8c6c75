"""Records of a JSON archive, whatever its container: JSON Lines, a JSON array (streamed item by
item), or a single JSON document."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

import ijson
import numpy as np
import orjson

from mempipe.archives.limits import ArchiveLimits, RecordLimitError, archive_limits
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
    position: int | None = None
    """Its place in its document's list, where a document's records are read one by one."""

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
    stream: BinaryIO,
    *,
    lines: bool = False,
    tell: Callable[[], int] | None = None,
    limits: ArchiveLimits | None = None,
    record_keys: tuple[str, ...] = (),
) -> Iterator[JsonRecord | BrokenRecord]:
    """``lines`` forces JSON Lines (a ``.jsonl`` file is read line by line whatever its first
    lines hold); ``tell`` gives the byte offset reached in the file, for messages; ``limits``
    bound every record (the process's ``MEMPIPE_ARCHIVE_*`` when not given); ``record_keys``:
    a document that opens with one of these keys holding a list (mem0's ``{"results": [``)
    has its list's items read as its records, one by one, so that one past a limit costs only
    what follows it, not the records before."""
    limits = limits or archive_limits()
    head = _skip_whitespace(stream)
    if lines:
        yield from _lines(_replay(head, stream), limits)
        return
    if head == b"[":
        yield from _array_items(_replay(head, stream), tell, limits)
        return
    first_line = head + stream.readline(limits.max_line_bytes)
    if key := _record_key(first_line, record_keys):  # a document on one line
        yield from _listed_items(_replay(first_line, stream), tell, limits, key)
        return
    if _parses(first_line):
        yield from _lines(_replay(first_line, stream), limits)
        return
    # Either JSON Lines whose first lines are broken, or one pretty-printed document. A JSON
    # Lines record starts at column 0 and is an object on its own; inside a pretty-printed
    # document only its opening and closing braces stand at column 0. The lines looked at are
    # bounded like any other: a document with one huge line is read as a document.
    consumed = [first_line]
    is_lines = False
    budget = limits.max_line_bytes
    for _ in range(LOOKAHEAD_LINES):
        line = stream.readline(budget)
        budget -= len(line)
        if not line or budget <= 0:
            consumed.append(line)
            break
        consumed.append(line)
        if line[:1] == b"{" and _is_object(line):
            is_lines = True
            break
    replay = _replay(b"".join(consumed), stream)
    if is_lines:
        yield from _lines(replay, limits)
        return
    if key := _record_key(b"".join(consumed), record_keys):
        yield from _listed_items(replay, tell, limits, key)
        return
    yield from _single_document(replay, tell, limits)


_OPENS_WITH_LIST = re.compile(rb'\s*\{\s*"(\w+)"\s*:\s*\[')


def _record_key(head: bytes, record_keys: tuple[str, ...]) -> str | None:
    """The key of ``record_keys`` whose list the document opens with, if it does."""
    opened = _OPENS_WITH_LIST.match(head) if record_keys else None
    key = opened.group(1).decode() if opened else None
    return key if key in record_keys else None


def _listed_items(
    stream: BinaryIO, tell: Callable[[], int] | None, limits: ArchiveLimits, key: str
) -> Iterator[JsonRecord | BrokenRecord]:
    """The items of the list the document opens with, each a record of its own (index 0, the
    document; ``position``, its place in the list)."""
    position = -1
    what = f"the JSON document's {key!r} list"
    guarded = _guarded(stream, limits, record_depth=2)
    try:
        for position, value in enumerate(ijson.items(guarded, f"{key}.item", use_float=True)):
            yield JsonRecord(value, line=None, index=0, position=position)
    except ijson.JSONError as exc:
        yield _stopped(guarded, tell, position + 1, what, exc)
    except RecordLimitError as exc:
        yield _past_limit(tell, position + 1, what, exc)


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


def _lines(stream: BinaryIO, limits: ArchiveLimits) -> Iterator[JsonRecord | BrokenRecord]:
    longest = limits.max_line_bytes
    for number, text in enumerate(iter(lambda: stream.readline(longest + 1), b""), start=1):
        if len(text) > longest and not text.endswith(b"\n"):
            while (rest := stream.readline(1 << 16)) and not rest.endswith(b"\n"):
                pass  # the rest of the line, read away in pieces: constant memory
            yield BrokenRecord(number, None, limits.line_reason(), _preview(text))
            continue
        if not text.strip():
            continue
        if text.count(b"[") + text.count(b"{") > limits.max_depth and too_deep(text, limits):
            yield BrokenRecord(number, None, limits.depth_reason(), _preview(text))
            continue
        try:
            yield JsonRecord(orjson.loads(text), line=number, index=None, text=text)
        except orjson.JSONDecodeError as exc:
            raw = text.decode("utf-8", errors="replace").rstrip("\r\n")
            yield BrokenRecord(number, None, f"not valid JSON: {exc}", raw)


PREVIEW_BYTES = 200
"""How much of a record past a limit its reject keeps: enough to find it, not the record."""


def _preview(text: bytes) -> str:
    return text[:PREVIEW_BYTES].decode("utf-8", errors="replace").rstrip("\r\n") + " …"


def too_deep(text: bytes, limits: ArchiveLimits) -> bool:
    guard = StructureGuard(io.BytesIO(text), limits, record_depth=0)
    try:
        guard.scan(text)
    except RecordLimitError:
        return True
    return False


def _array_items(
    stream: BinaryIO, tell: Callable[[], int] | None, limits: ArchiveLimits
) -> Iterator[JsonRecord | BrokenRecord]:
    index = -1
    guarded = _guarded(stream, limits, record_depth=1)
    try:
        for index, value in enumerate(ijson.items(guarded, "item", use_float=True)):
            yield JsonRecord(value, line=None, index=index)
    except ijson.JSONError as exc:
        yield _stopped(guarded, tell, index + 1, "the JSON array", exc)
    except RecordLimitError as exc:
        yield _past_limit(tell, index + 1, "the JSON array", exc)


def _single_document(
    stream: BinaryIO, tell: Callable[[], int] | None, limits: ArchiveLimits
) -> Iterator[JsonRecord | BrokenRecord]:
    guarded = _guarded(stream, limits, record_depth=0)
    try:
        for value in ijson.items(guarded, "", use_float=True):
            yield JsonRecord(value, line=None, index=0)
    except ijson.JSONError as exc:
        yield _stopped(guarded, tell, 0, "the JSON document", exc)
    except RecordLimitError as exc:
        yield _past_limit(tell, 0, "the JSON document", exc)


def _guarded(stream: BinaryIO, limits: ArchiveLimits, record_depth: int) -> BinaryIO:
    return StructureGuard(stream, limits, record_depth)  # type: ignore[return-value]


def _past_limit(
    tell: Callable[[], int] | None, index: int, what: str, exc: RecordLimitError
) -> BrokenRecord:
    """A record past a limit ends what can be read of an array or document (its end cannot be
    found without reading it): the records before it are kept, the file is named failed."""
    offset = tell() if tell is not None else None
    where = f" at byte {offset}" if offset is not None else ""
    reason = f"record {index} of {what}{where} is {exc}; nothing after it was read"
    return BrokenRecord(None, index, reason, "", fatal=True, offset=offset)


_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_STRING_REST = re.compile(rb'(?:[^"\\]++|\\.)*+"', re.DOTALL)
"""A whole string; the rest of a string begun in an earlier chunk, up to its closing quote."""
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = np.zeros(256, dtype=np.int64)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


class StructureGuard:
    """A JSON stream whose nesting depth and record sizes are checked as it is read, before
    any parser builds anything of it: strings are skipped by a regular expression and the
    brackets left counted with numpy, so a record 200,000 levels deep costs one chunk's read.
    A record is what opens at ``record_depth`` (1: an array's items; 0: a whole document)."""

    def __init__(self, stream: BinaryIO, limits: ArchiveLimits, record_depth: int) -> None:
        self._stream = stream
        self._held = b""  # a chunk's last bytes where an escape may go on in the next
        self._limits = limits
        self._record_depth = record_depth
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._open_bytes = 0
        self._failed: RecordLimitError | None = None

    def read(self, size: int = -1) -> bytes:
        """The next bytes (one read of the stream below: a parser sees each chunk as soon as
        it is checked); past a limit, the bytes before the offending bracket first, so the
        parser yields every record before it, then the error at the next read."""
        if self._failed is not None:
            raise self._failed
        if size == 0:
            return b""  # a parser's probe of what the stream yields
        data = b""
        while not data:  # an empty read is the end of the stream: only return one there
            chunk = self._stream.read(size if size > 0 else 1 << 16)
            data, self._held = unpaired_surrogates_marked(self._held + chunk, final=not chunk)
            if not chunk:
                break
        if data:
            depth, in_string, escaped = self._depth, self._in_string, self._escaped
            try:
                self.scan(data)
            except RecordLimitError as exc:
                if self._depth <= self._limits.max_depth:
                    raise  # a record too large: what came before it was handed over already
                self._failed = exc
                data = data[: _deepest_at(data, depth, in_string, escaped, self._limits.max_depth)]
                if not data:
                    raise
        return data

    def scan(self, data: bytes) -> None:
        """Follow ``data``, the next bytes of the stream; raise past a limit."""
        start = 0
        if self._in_string:
            if self._escaped:
                start, self._escaped = 1, False
            rest = _STRING_REST.match(data, start)
            if rest is None:
                self._escaped = _odd_backslashes(data, start)
                self._count_open(len(data), touched=False)
                return
            start, self._in_string = rest.end(), False
        outside = _STRING.sub(b"", data[start:] if start else data)
        quote = outside.find(b'"')
        if quote >= 0:  # a string that goes on in the next chunk
            self._in_string = True
            self._escaped = _odd_backslashes(data, data.rfind(b'"') + 1)
            outside = outside[:quote]
        brackets = outside.translate(None, _NOT_BRACKETS)
        touched = self._depth <= self._record_depth
        if brackets:
            depths = self._depth + np.cumsum(_STEP[np.frombuffer(brackets, np.uint8)])
            if int(depths.max()) > self._limits.max_depth:
                self._depth = int(depths.max())
                raise RecordLimitError(self._limits.depth_reason())
            self._depth = int(depths[-1])
            touched = touched or bool((depths <= self._record_depth).any())
        self._count_open(len(data), touched)

    def _count_open(self, size: int, touched: bool) -> None:
        """Bytes since a record last closed (to a chunk's precision: 64 KiB in 64 MiB)."""
        self._open_bytes = 0 if touched else self._open_bytes + size
        if self._open_bytes > self._limits.max_record_bytes:
            raise RecordLimitError(self._limits.record_reason())


_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_ESCAPES = re.compile(rb"(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")
_HIGH = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_HELD_BACK = 12
"""What may hold an unfinished surrogate escape or pair at a chunk's end (``\\ud83d\\ude0``)."""


def unpaired_surrogates_marked(data: bytes, *, final: bool = False) -> tuple[bytes, bytes]:
    """``data`` with each unpaired surrogate escape (``\\ud800`` with no low half after it, or
    a low half alone) written ``\\uffff`` (a noncharacter), the same length, and the bytes
    held back for the next chunk: its last ones, and any escape, or high half of a pair, they
    would cut (none once the stream has ended: ``final``). The C parser would turn an unpaired
    escape into ``?`` silently; U+FFFF is refused where the record is validated
    (:mod:`mempipe.schemas.text`), so the record is a reject. Most chunks hold no surrogate
    escape and pass as they are."""
    cut = len(data) if final else _cut(data)
    body, held = data[:cut], data[cut:]
    if not _SURROGATE.search(body):
        return body, held
    escapes = [m for m in _ESCAPES.finditer(body) if len(m.group(1)) % 2 == 1]
    marked = bytearray(body)
    for n, escape in enumerate(escapes):
        if not _paired(escape, escapes[n - 1] if n else None, escapes[n + 1 : n + 2]):
            marked[escape.end() - 4 : escape.end()] = b"ffff"
    return bytes(marked), held


def _cut(data: bytes) -> int:
    """Where the bytes held back begin: before the last ``_HELD_BACK``, moved back to the start
    of an escape it would cut, and past any high halves before it (their low half may follow)."""
    cut = max(0, len(data) - _HELD_BACK)
    backslash = data.rfind(b"\\", max(0, cut - 5), cut)
    if backslash >= 0:
        cut = backslash
    while cut >= 6 and _HIGH.fullmatch(data, cut - 6, cut):
        cut -= 6
    return cut


def _paired(escape: re.Match[bytes], before: re.Match[bytes] | None, after: list) -> bool:
    if int(escape.group(2), 16) < 0xDC00:
        follows = after[0] if after else None
        return follows is not None and follows.start() == escape.end() and _low(follows)
    return before is not None and before.end() == escape.start() and not _low(before)


def _low(escape: re.Match[bytes]) -> bool:
    return int(escape.group(2), 16) >= 0xDC00


_TOKEN = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[\[\]{}"]', re.DOTALL)


def _deepest_at(data: bytes, depth: int, in_string: bool, escaped: bool, limit: int) -> int:
    """Where in ``data`` the depth first passes ``limit``, from the state before it: the slow,
    exact walk, taken once, for the chunk that holds the offending record."""
    start = 0
    if in_string:
        rest = _STRING_REST.match(data, 1 if escaped else 0)
        start = rest.end() if rest is not None else len(data)
    for token in _TOKEN.finditer(data, start):
        mark = token.group()
        if mark in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return token.start()
        elif mark in (b"]", b"}"):
            depth -= 1
        elif mark == b'"':
            break
    return len(data)


def _odd_backslashes(data: bytes, start: int) -> bool:
    """The chunk ends inside a string with an escape begun: its next byte is escaped."""
    tail = data[start:]
    return (len(tail) - len(tail.rstrip(b"\\"))) % 2 == 1


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
