"""Open an archive file as a decompressed binary stream, detecting gzip and zstd by their magic
bytes, and report how much of the file has been read (for progress)."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

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
def open_stream(path: Path) -> Iterator[ArchiveStream]:
    try:
        raw = path.open("rb", buffering=0)
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot open: {exc.strerror}") from exc
    with raw:
        magic = raw.read(4)
        raw.seek(0)
        stream: BinaryIO
        if magic.startswith(GZIP_MAGIC):
            stream = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        elif magic.startswith(ZSTD_MAGIC):
            reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            stream = io.BufferedReader(reader, buffer_size=1 << 16)  # type: ignore[arg-type]
        else:
            stream = io.BufferedReader(raw, buffer_size=1 << 16)  # type: ignore[arg-type]
        yield ArchiveStream(stream=stream, raw=raw, size=path.stat().st_size)


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
