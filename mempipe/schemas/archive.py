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


TURN_FIELDS: tuple[str, ...] = (
    "org_id",
    "project_id",
    "user_id",
    "agent_id",
    "session_id",
    "turn_seq",
    "role",
    "content",
    "created_at",
    "message_id",
    "name",
    "model",
    "tool_calls",
    "tool_call_id",
    "metadata",
)
"""The fields of the canonical turn format, in documentation order."""
