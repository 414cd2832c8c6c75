"""Read one archive file into turns and rejects, streaming."""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

import zstandard

from mempipe.archives.detect import BINARY, UnknownFormatError, sniff_format, suffix_format
from mempipe.archives.drafts import Draft, Skipped, finish, reject
from mempipe.archives.formats import FileReading
from mempipe.archives.formats.tabular import ColumnMappingError
from mempipe.archives.registry import format_class
from mempipe.archives.streams import ArchiveStream, binary_head, open_raw, stream_of
from mempipe.errors import ArchiveError
from mempipe.schemas.archive import ArchiveFormat, TimeWindow
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import Turn

UNREADABLE = (OSError, EOFError, zlib.error, zstandard.ZstdError)
"""What a corrupt or truncated compressed stream, or a failing disk, raises while being read."""


class ArchiveReader:
    """Iterates one file's turns and rejects. A file that cannot be read as the format says
    (undetectable, unmappable columns, corrupt compression, truncated JSON) yields one reject
    for the whole file with the byte offset reached, never an error: the other files of a
    backfill go on. ``failed`` then says why, so the run can report the file as failed."""

    def __init__(
        self,
        path: Path,
        format: str,
        defaults: IdentityDefaults,
        columns: Mapping[str, str] | None = None,
        times: TimeWindow | None = None,
    ) -> None:
        """``times``: turn times outside it are rejects (None: any time)."""
        self.path = path
        self.times = times
        self.format: str | None = None if format == ArchiveFormat.AUTO else format
        self.defaults = defaults
        self.columns = dict(columns or {})
        self.size = path.stat().st_size
        self._stream: ArchiveStream | None = None
        self._done = False
        self.failed: str | None = None

    @property
    def bytes_read(self) -> int:
        if self._done:
            return self.size
        return self._stream.bytes_read if self._stream is not None else 0

    def __iter__(self) -> Iterator[Turn | Reject | Skipped]:
        try:
            for item in self._items():
                if isinstance(item, Draft):
                    item = self._finish(item)
                elif isinstance(item, Reject) and item.whole_file:
                    self.failed = item.reason
                yield item
        finally:
            self._done = True
            self._stream = None  # its 64 KiB buffers: a group holds thousands of read files

    def _items(self) -> Iterator[Draft | Reject | Skipped]:
        name = str(self.path)
        if self.size == 0:
            yield self._whole_file("empty file")
            return
        try:
            with ExitStack() as files:
                found = self.format or suffix_format(self.path)
                raw: BinaryIO | None = None
                if found is None:
                    raw = files.enter_context(open_raw(self.path))
                    found = sniff_format(self.path, raw)
                self.format = found
                parser = format_class(found)(name)
                if not parser.streamed:
                    yield from parser.drafts(FileReading(self.path, None, self.columns))
                    return
                if raw is None:
                    raw = files.enter_context(open_raw(self.path))
                stream = self._stream = stream_of(raw, self.size)
                if binary_head(stream.stream):
                    raise UnknownFormatError(BINARY)
                try:
                    reading = FileReading(self.path, stream, self.columns, self._offset)
                    yield from parser.drafts(reading)
                except UNREADABLE as exc:
                    yield self._unreadable(exc, "the records before it were kept")
        except (UnknownFormatError, ColumnMappingError, ArchiveError) as exc:
            yield self._whole_file(f"{exc}")
        except UNREADABLE as exc:
            yield self._unreadable(exc, "nothing of it could be read")

    def _finish(self, draft: Draft) -> Turn | Reject:
        turn = finish(draft, self.defaults)
        if isinstance(turn, Turn) and self.times is not None:
            problem = self.times.problem(turn.created_at)
            if problem is not None:
                return reject(draft.source, problem, draft.original)
        return turn

    def _unreadable(self, exc: BaseException, kept: str) -> Reject:
        kind = "cannot read the file" if isinstance(exc, OSError) else "corrupt or truncated"
        detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return self._whole_file(
            f"{kind} at or before byte {self._offset()} of {self.size}: {detail}; {kept}"
        )

    def _offset(self) -> int:
        try:
            return self._stream.raw.tell() if self._stream is not None else 0
        except (OSError, ValueError):
            return 0

    def _whole_file(self, reason: str) -> Reject:
        return Reject(
            path=str(self.path),
            reason=f"whole file rejected: {reason}",
            raw="",
            offset=self._offset(),
            whole_file=True,
        )
