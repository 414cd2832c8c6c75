"""How an archive is read: its format and, for tables, which column holds which turn field."""

from __future__ import annotations

from enum import StrEnum


class ArchiveFormat(StrEnum):
    AUTO = "auto"
    TURNS = "turns"
    OPENAI = "openai"
    CHATGPT = "chatgpt"
    CLAUDE = "claude"
    SHAREGPT = "sharegpt"
    CSV = "csv"
    PARQUET = "parquet"
