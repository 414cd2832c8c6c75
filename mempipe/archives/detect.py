"""Tell an archive's format from its suffix (tables) or its first record (JSON)."""

from __future__ import annotations

from pathlib import Path

from mempipe.archives.json_records import BrokenRecord, JsonRecord, iter_json_records
from mempipe.archives.paths import LINE_SUFFIXES, logical_suffix
from mempipe.archives.registry import TABLE_FORMATS, classify
from mempipe.archives.streams import binary_head, open_stream

RECORDS_TO_SNIFF = 50
BINARY = "binary data (NUL bytes in its first 8 KiB), not a text archive"


class UnknownFormatError(ValueError):
    """The first records match no known format: the whole file is rejected."""


def detect_format(path: Path) -> str:
    suffix = logical_suffix(path)
    if suffix in TABLE_FORMATS:
        return TABLE_FORMATS[suffix]
    with open_stream(path) as archive:
        if binary_head(archive.stream):
            raise UnknownFormatError(BINARY)
        records = iter_json_records(
            archive.stream, lines=suffix in LINE_SUFFIXES, tell=lambda: archive.bytes_read
        )
        for seen, record in enumerate(records):
            if seen >= RECORDS_TO_SNIFF:
                break
            if isinstance(record, BrokenRecord) and record.fatal:
                raise UnknownFormatError(record.reason)
            if isinstance(record, JsonRecord):
                found = classify(record.value)
                if found is not None:
                    return found
                keys = sorted(record.value)[:12] if isinstance(record.value, dict) else None
                raise UnknownFormatError(
                    f"cannot tell the format: the first record has keys {keys}; pass --format"
                )
    raise UnknownFormatError("cannot tell the format: no readable JSON record; pass --format")
