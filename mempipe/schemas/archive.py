"""How an archive is read: its format and, for tables, which column holds which turn field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.identity import IdentityDefaults


class ArchiveFormat(StrEnum):
    AUTO = "auto"
    TURNS = "turns"
    OPENAI = "openai"
    CHATGPT = "chatgpt"
    CLAUDE = "claude"
    SHAREGPT = "sharegpt"
    CSV = "csv"
    PARQUET = "parquet"


class FormatKind(StrEnum):
    """What an input format brings in."""

    TURNS = "turns"
    """Conversations, read as turns by a backfill."""
    MEMORIES = "memories"
    """Another system's long-term memories, reconciled by an import."""
    BUNDLE = "bundle"
    """A mempipe bundle directory, imported verbatim."""


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FUTURE_MARGIN = timedelta(days=1)


class TimeWindow(BaseModel):
    """The turn times a backfill takes as real: none before 1970, none more than a margin after
    the run. A time outside it is a typo or a broken clock, and a reject (the whole turn: its
    place in time decides how sessions are cut and which fact is current)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    earliest: datetime = EPOCH
    latest: datetime

    @classmethod
    def around(cls, now: datetime, future_margin: timedelta = FUTURE_MARGIN) -> TimeWindow:
        return cls(latest=now + future_margin)

    def problem(self, at: datetime | None) -> str | None:
        """Why ``at`` is not plausible, or None."""
        if at is None:
            return None
        if at < self.earliest:
            return f"created_at {at.isoformat()} is before 1970: pass --allow-any-time to take it"
        if at > self.latest:
            return (
                f"created_at {at.isoformat()} is after {self.latest.isoformat()}, more than the "
                "future margin after the run: pass --allow-any-time to take it"
            )
        return None


class Reading(BaseModel):
    """How a backfill reads its archive files: the same for every file of the run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str = ArchiveFormat.AUTO
    defaults: IdentityDefaults
    run_id: str | None
    rejects_file: Path
    batch_size: int = Field(default=5000, ge=1)
    columns: dict[str, str] = Field(default_factory=dict)
    times: TimeWindow | None = None


class IngestRequest(Reading):
    """One archive file to read into the store: what the backfill's ingest of it needs."""

    path: Path
