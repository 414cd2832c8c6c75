"""Open an archive file as a decompressed binary stream of UTF-8, detecting gzip and zstd by
their magic bytes and UTF-16 / UTF-32 text by its byte-order mark or its pattern of NUL bytes,
and report how much of the file has been read (for progress)."""

from __future__ import annotations

import codecs
import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import zstandard

from mempipe.errors import ArchiveError

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass
class ArchiveStream:
    stream: BinaryIO
    raw: BinaryIO
    size: int

    @property
    def bytes_read(self) -> int:
        return self.raw.tell()


@contextmanager
def open_raw(path: Path) -> Iterator[BinaryIO]:
    """The file's bytes, unbuffered: what :func:`stream_of` reads, as often as it is asked."""
    try:
        raw = path.open("rb", buffering=0)
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot open: {exc.strerror}") from exc
    with raw:
        yield raw


class Borrowed(io.RawIOBase):
    """An open file lent to readers that are dropped before it is read again: their closing it
    (when collected) leaves the file open."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        return self._raw.readinto(buffer)  # type: ignore[attr-defined]

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()


def stream_of(raw: BinaryIO, size: int) -> ArchiveStream:
    """The open file read again from its start, decompressed and as UTF-8: detection and the
    parser each take one of these from the same open file (a directory of tiny files pays one
    open and close a file, not two)."""
    raw.seek(0)
    magic = raw.read(4)
    raw.seek(0)
    stream: BinaryIO
    if magic.startswith(GZIP_MAGIC):
        stream = io.BufferedReader(GzipStream(raw), buffer_size=1 << 16)  # type: ignore[assignment]
    elif magic.startswith(ZSTD_MAGIC):
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        stream = io.BufferedReader(reader, buffer_size=1 << 16)  # type: ignore[arg-type]
    else:
        stream = io.BufferedReader(raw, buffer_size=1 << 16)  # type: ignore[arg-type]
    encoding = text_encoding(stream.peek(4)[:4])
    if encoding is not None:
        stream = io.BufferedReader(Utf8Stream(stream, encoding), buffer_size=1 << 16)  # type: ignore[arg-type]
    return ArchiveStream(stream=stream, raw=raw, size=size)


SNIFF_BYTES = 8192
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def text_encoding(head: bytes) -> str | None:
    """UTF-16 or UTF-32 by the byte-order mark, else by the NUL bytes around the first
    character (JSON and CSV begin with an ASCII one); None for UTF-8 (and anything else)."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    if len(head) < 4 or (head[0] and head[1] and head[2]):
        return None
    zeros = tuple(byte == 0 for byte in head)
    return {
        (False, True, True, True): "utf-32-le",
        (True, True, True, False): "utf-32-be",
        (False, True, False, True): "utf-16-le",
        (True, False, True, False): "utf-16-be",
    }.get(zeros)  # type: ignore[arg-type]


class Utf8Stream(io.RawIOBase):
    """A UTF-16 / UTF-32 stream as UTF-8, decoded as it is read (a character that does not
    decode becomes U+FFFD, as a bad byte of UTF-8 would)."""

    CHUNK = 1 << 16

    def __init__(self, stream: BinaryIO, encoding: str) -> None:
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self._pending = b""
        self._ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending and not self._ended:
            chunk = self._stream.read(self.CHUNK)
            self._ended = not chunk
            self._pending = self._decoder.decode(chunk, final=self._ended).encode("utf-8")
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def binary_head(stream: BinaryIO) -> bool:
    """The decompressed stream's first 8 KiB are binary data, not a text archive: NUL bytes in
    more than one byte of a hundred, or NUL bytes in what is not UTF-8. One stray NUL in a text
    file costs only the record that holds it. Reads nothing away (a peek)."""
    peek = getattr(stream, "peek", None)
    head = peek(SNIFF_BYTES)[:SNIFF_BYTES] if peek is not None else b""
    nuls = head.count(b"\x00")
    if not nuls:
        return False
    if nuls * 100 > len(head):
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 3  # not a character cut at the end of the peek
    return False


class GzipStream(io.RawIOBase):
    """Gzip (one or more members) decompressed as it is read. Unlike :class:`gzip.GzipFile`,
    every byte decompressed before a corrupt or truncated spot is handed out before the error
    is raised, so the records in front of the damage are kept."""

    CHUNK = 1 << 16

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
        self._pending = b""
        self._started = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending:
            compressed = self._inflate.unconsumed_tail or self._raw.read(self.CHUNK)
            if not compressed:
                if self._inflate.eof or not self._started:
                    return 0
                raise EOFError("the gzip stream ends before its end marker (truncated)")
            self._started = True
            self._pending = self._inflate.decompress(compressed, self.CHUNK)
            if self._inflate.eof:
                rest = self._inflate.unused_data
                self._inflate = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
                self._started = bool(rest.strip(b"\x00"))
                if self._started:
                    self._pending += self._inflate.decompress(rest, self.CHUNK)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


class PrependedStream(io.RawIOBase):
    """Bytes already read from a stream, put back in front of the rest of it."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        chunk = self._rest.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)
