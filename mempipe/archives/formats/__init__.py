"""One parser per archive format: a source record in, drafts (or rejects) out; and what every
format's reading of one file is given (:class:`FileReading`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from mempipe.archives.drafts import Draft, Skipped
from mempipe.archives.json_records import BrokenRecord, JsonRecord, iter_json_records
from mempipe.archives.paths import LINE_SUFFIXES, logical_suffix
from mempipe.schemas.archive import FormatKind
from mempipe.schemas.reject import Reject

if TYPE_CHECKING:
    from mempipe.archives.streams import ArchiveStream

RecordParser = Callable[[JsonRecord], Iterable[Draft | Reject | Skipped]]
"""Parses one record of one file; a new parser is made per file (some keep per-file state)."""


@dataclass
class FileReading:
    """One file as its format reads it: the path, the opened stream (None for a format read
    from its path), the column mapping of a table, and where in the file the reading is."""

    path: Path
    stream: ArchiveStream | None
    columns: Mapping[str, str] = field(default_factory=dict)
    tell: Callable[[], int] = lambda: 0

    @property
    def name(self) -> str:
        return str(self.path)


class JsonFormat:
    """A format of JSON records, whole documents or lines, each parsed by ``self(record)``; a
    record that is not JSON is a reject with its place (one that ends the file, a whole-file
    one)."""

    kind: ClassVar[FormatKind]
    suffixes: ClassVar[tuple[str, ...]] = ()
    streamed: ClassVar[bool] = True
    record_keys: ClassVar[tuple[str, ...]] = ()
    """Keys under which a document holds its records (``iter_json_records``)."""

    def __call__(self, record: JsonRecord) -> Iterable[Draft | Reject | Skipped]:
        raise NotImplementedError

    def drafts(self, reading: FileReading) -> Iterator[Draft | Reject | Skipped]:
        assert reading.stream is not None
        records = iter_json_records(
            reading.stream.stream,
            lines=logical_suffix(reading.path) in LINE_SUFFIXES,
            tell=reading.tell,
            record_keys=self.record_keys,
        )
        for record in records:
            if isinstance(record, BrokenRecord):
                yield Reject(
                    path=reading.name,
                    line=record.line,
                    index=record.index,
                    reason=f"whole file rejected: {record.reason}"
                    if record.fatal
                    else record.reason,
                    raw=record.text,
                    offset=record.offset,
                    whole_file=record.fatal,
                )
            else:
                yield from self(record)


class ClaimedFormat:
    """A format not told by its records: claimed by the files' suffixes, or named only
    (``--format``); made per file with its path."""

    suffixes: ClassVar[tuple[str, ...]] = ()
    streamed: ClassVar[bool] = True

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool:
        return False

    def __init__(self, path: str) -> None:
        self.path = path


def first_present(mapping: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = mapping.get(key)
        if value not in (None, ""):
            return value
    return None
