"""What one record of an archive may cost, whatever the file holds: a nesting depth, a record's
size and a line's length. A record past a limit is a reject naming the limit (the setting that
raises it); reading stays in constant memory, so one hostile file costs its own reject and
nothing else of the run."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 1 << 20


class ArchiveLimits(BaseSettings):
    """``MEMPIPE_ARCHIVE_MAX_DEPTH``, ``_MAX_RECORD_BYTES``, ``_MAX_LINE_BYTES``."""

    model_config = SettingsConfigDict(env_prefix="MEMPIPE_ARCHIVE_", extra="ignore", frozen=True)

    max_depth: int = Field(
        default=100, ge=2, description="how deeply a record's arrays and objects may nest"
    )
    max_record_bytes: int = Field(
        default=64 * MIB, ge=1024, description="the largest record of a JSON array or document"
    )
    max_line_bytes: int = Field(
        default=64 * MIB, ge=1024, description="the longest line of JSON Lines or CSV"
    )

    def depth_reason(self) -> str:
        return f"nested deeper than {self.max_depth} levels (MEMPIPE_ARCHIVE_MAX_DEPTH)"

    def record_reason(self) -> str:
        return (
            f"a record larger than {self.max_record_bytes} bytes (MEMPIPE_ARCHIVE_MAX_RECORD_BYTES)"
        )

    def line_reason(self) -> str:
        return f"a line longer than {self.max_line_bytes} bytes (MEMPIPE_ARCHIVE_MAX_LINE_BYTES)"


class RecordLimitError(ValueError):
    """A record went past one of the limits; the message names it."""


@lru_cache(maxsize=1)
def archive_limits() -> ArchiveLimits:
    """The process's limits, read once (a backfill of 200,000 files asks for them each)."""
    return ArchiveLimits()
