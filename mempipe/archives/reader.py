"""Read one archive file into turns and rejects, streaming."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa

from mempipe.archives.detect import UnknownFormatError, detect_format
from mempipe.archives.drafts import Draft, finish
from mempipe.archives.formats import RecordParser
from mempipe.archives.formats.chatgpt import ChatGPTExport
from mempipe.archives.formats.claude import ClaudeExport
from mempipe.archives.formats.openai import OpenAIChat
from mempipe.archives.formats.sharegpt import ShareGPT
from mempipe.archives.formats.tabular import ColumnMappingError, csv_drafts, parquet_drafts
from mempipe.archives.formats.turns import CanonicalTurns
from mempipe.archives.json_records import BrokenRecord, iter_json_records
from mempipe.archives.paths import logical_suffix
from mempipe.archives.streams import ArchiveStream, open_stream
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import Turn

JSON_PARSERS: dict[ArchiveFormat, type] = {
    ArchiveFormat.TURNS: CanonicalTurns,
    ArchiveFormat.OPENAI: OpenAIChat,
    ArchiveFormat.CHATGPT: ChatGPTExport,
    ArchiveFormat.CLAUDE: ClaudeExport,
    ArchiveFormat.SHAREGPT: ShareGPT,
}


class ArchiveReader:
    """Iterates one file's turns and rejects. A file that cannot be read as the format says
    (undetectable, unmappable columns) yields one reject for the whole file, never an error:
    the other files of a backfill go on."""

    def __init__(
        self,
        path: Path,
        fmt: ArchiveFormat,
        defaults: IdentityDefaults,
        columns: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        self.requested = fmt
        self.format: ArchiveFormat | None = None if fmt is ArchiveFormat.AUTO else fmt
        self.defaults = defaults
        self.columns = dict(columns or {})
        self.size = path.stat().st_size
        self._stream: ArchiveStream | None = None
        self._done = False

    @property
    def bytes_read(self) -> int:
        if self._done:
            return self.size
        return self._stream.bytes_read if self._stream is not None else 0

    def __iter__(self) -> Iterator[Turn | Reject]:
        try:
            for item in self._items():
                yield finish(item, self.defaults) if isinstance(item, Draft) else item
        finally:
            self._done = True

    def _items(self) -> Iterator[Draft | Reject]:
        name = str(self.path)
        try:
            fmt = self.format or detect_format(self.path)
            self.format = fmt
            if fmt is ArchiveFormat.PARQUET:
                yield from parquet_drafts(name, self.columns)
                return
            with open_stream(self.path) as stream:
                self._stream = stream
                if fmt is ArchiveFormat.CSV:
                    delimiter = "\t" if logical_suffix(self.path) == ".tsv" else ","
                    yield from csv_drafts(stream.stream, name, self.columns, delimiter)
                else:
                    yield from self._json_items(JSON_PARSERS[fmt](name), stream)
        except (UnknownFormatError, ColumnMappingError, pa.ArrowException) as exc:
            yield Reject(path=name, reason=f"whole file rejected: {exc}", raw="")

    def _json_items(self, parse: RecordParser, stream: ArchiveStream) -> Iterator[Draft | Reject]:
        name = str(self.path)
        for record in iter_json_records(stream.stream):
            if isinstance(record, BrokenRecord):
                yield Reject(
                    path=name,
                    line=record.line,
                    index=record.index,
                    reason=record.reason,
                    raw=record.text,
                )
            else:
                yield from parse(record)
