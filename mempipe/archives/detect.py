"""Tell an archive's format from its suffix (tables) or its first records (JSON): the first of
them that a format claims decides, so a few broken or foreign records at the top of a file
cost only themselves."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from mempipe.archives.json_records import BrokenRecord, JsonRecord, iter_json_records
from mempipe.archives.paths import LINE_SUFFIXES, logical_suffix
from mempipe.archives.registry import by_suffix, classify
from mempipe.archives.streams import Borrowed, binary_head, open_raw, stream_of

RECORDS_TO_SNIFF = 50
BINARY = "binary data (NUL bytes throughout its first 8 KiB), not a text archive"


class UnknownFormatError(ValueError):
    """The first records match no known format: the whole file is rejected."""


def suffix_format(path: Path) -> str | None:
    """The format the file's suffix claims (a table's), if any: no need to open it."""
    return by_suffix(logical_suffix(path))


def detect_format(path: Path) -> str:
    claimed = suffix_format(path)
    if claimed is not None:
        return claimed
    with open_raw(path) as raw:
        return sniff_format(path, raw)


def sniff_format(path: Path, raw: BinaryIO) -> str:
    """The format of the file's first records, read from ``raw`` (the file already open) from
    its start; the caller reads it again."""
    archive = stream_of(Borrowed(raw), 0)  # type: ignore[arg-type]
    if binary_head(archive.stream):
        raise UnknownFormatError(BINARY)
    records = iter_json_records(
        archive.stream,
        lines=logical_suffix(path) in LINE_SUFFIXES,
        tell=lambda: archive.bytes_read,
    )
    first: str | None = None
    looked = 0
    for seen, record in enumerate(records):
        if seen >= RECORDS_TO_SNIFF:
            break
        if isinstance(record, BrokenRecord) and record.fatal:
            raise UnknownFormatError(record.reason)
        if isinstance(record, JsonRecord):
            found = classify(record.value)
            if found is not None:
                return found
            first = first or _described(record.value)
            looked += 1
    if first is not None:
        raise UnknownFormatError(
            f"cannot tell the format: no format claims any of its first {looked} record(s) "
            f"(the first {first}); pass --format"
        )
    raise UnknownFormatError("cannot tell the format: no readable JSON record; pass --format")


def _described(value: object) -> str:
    if isinstance(value, dict):
        return f"has keys {sorted(value)[:12]}"
    return f"is a JSON {type(value).__name__}, not an object"
