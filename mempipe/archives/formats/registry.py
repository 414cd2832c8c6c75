"""Every archive format in one place: the JSON formats with their parser and the rule that
recognises one of their records (in the order detection tries them, most specific first), and
the table formats by suffix. The reader and detection read from here and the CLI offers every
member of :class:`ArchiveFormat`, so a new format is its parser module (with its ``format`` and
``recognises``), its enum member and one line below."""

from __future__ import annotations

from typing import Any

from mempipe.archives.formats.chatgpt import ChatGPTExport
from mempipe.archives.formats.claude import ClaudeExport
from mempipe.archives.formats.openai import OpenAIChat
from mempipe.archives.formats.sharegpt import ShareGPT
from mempipe.archives.formats.turns import CanonicalTurns
from mempipe.schemas.archive import ArchiveFormat

JSON_FORMATS: tuple[type, ...] = (ChatGPTExport, ClaudeExport, ShareGPT, OpenAIChat, CanonicalTurns)
"""Each is a parser class made per file (``Parser(path)(record)`` yields drafts) with a
``format`` and a static ``recognises(record)``. Tried in this order: a record could match a
looser rule further down (a ChatGPT conversation also has a list of messages in some
exports)."""
TABLE_FORMATS: dict[str, ArchiveFormat] = {
    ".parquet": ArchiveFormat.PARQUET,
    ".csv": ArchiveFormat.CSV,
    ".tsv": ArchiveFormat.CSV,
}
JSON_PARSERS: dict[ArchiveFormat, type] = {parser.format: parser for parser in JSON_FORMATS}


def classify(record: Any) -> ArchiveFormat | None:
    """The format a JSON record belongs to, from the keys each format is known by."""
    if not isinstance(record, dict):
        return None
    return next((p.format for p in JSON_FORMATS if p.recognises(record)), None)
