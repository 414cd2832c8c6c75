"""Typed summaries that tasks return, flows add up and the CLI prints."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.reject import Reject

Owner = tuple[str, str, str | None]
"""A user as the store keys one: org, project, user."""


IdentityConflicts = Annotated[
    int, Field(description="of the rejected, those carrying an id that differs from one named")
]


class UserCount(BaseModel):
    """A user a run brought records in for, and how many of its records are theirs: what an
    operator checks an erasure request against."""

    model_config = ConfigDict(extra="forbid")

    org_id: str
    project_id: str
    user_id: str | None
    records: int

    @staticmethod
    def of(counts: Counter[Owner]) -> list[UserCount]:
        return [
            UserCount(org_id=org, project_id=project, user_id=user, records=n)
            for (org, project, user), n in sorted(counts.items(), key=lambda kv: str(kv[0]))
        ]

    @staticmethod
    def summed(parts: Iterable[list[UserCount]]) -> list[UserCount]:
        counts: Counter[Owner] = Counter()
        for part in parts:
            UserCount.count_into(counts, part)
        return UserCount.of(counts)

    @staticmethod
    def count_into(counts: Counter[Owner], users: list[UserCount]) -> None:
        for user in users:
            counts[(user.org_id, user.project_id, user.user_id)] += user.records


def users_line(users: list[UserCount], one: str, many: str) -> str:
    """``users: jonas 8 turns, acct-1 4 turns`` (the org and project where more than one)."""
    if not users:
        return "users: none"
    scoped = len({(u.org_id, u.project_id) for u in users}) > 1
    return "users: " + ", ".join(
        (f"{u.org_id}/{u.project_id}/" if scoped else "")
        + f"{u.user_id or '(no user)'} {u.records} {one if u.records == 1 else many}"
        for u in users
    )


class MigrationReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    applied: list[str] = Field(default_factory=list, description="applied by this call")
    already_applied: list[str] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list, description="not applied (read-only check)")
    folder_created: str | None = Field(
        default=None, description="the folder `init` made for a new SQLite store"
    )


class TurnWriteResult(BaseModel):
    """What a batch insert did. A key already stored with other content is a conflict, not a
    duplicate: it is returned so the caller can reject it rather than lose it."""

    model_config = ConfigDict(extra="forbid")

    inserted: int = 0
    duplicates: int = 0
    conflicts: list[Reject] = Field(default_factory=list)
    erased: int = Field(default=0, description="turns of an owner erased since the run began")


class IngestSummary(BaseModel):
    """One archive file read into the store. Every record read is accounted for:
    ``turns_read = turns_inserted + duplicates_skipped + rejected + skipped_empty +
    skipped_erased``."""

    model_config = ConfigDict(extra="forbid")

    path: str
    format: str
    turns_read: int = 0
    turns_inserted: int = 0
    duplicates_skipped: int = 0
    rejected: int = 0
    identity_conflicts: IdentityConflicts = 0
    skipped_empty: int = Field(default=0, description="messages with nothing a person saw")
    skipped_erased: int = Field(
        default=0, description="turns of an owner erased while the run went on: not written"
    )
    failed: str | None = Field(
        default=None, description="why the rest of the file could not be read, if it could not"
    )
    users: list[UserCount] = Field(
        default_factory=list,
        description="the users the file's turns were read for (inserted, already stored, or "
        "not written: a conflict, an erased user), with how many turns each",
    )

    @property
    def noteworthy(self) -> bool:
        """Worth a line of its own among many files: something of it did not go in as read."""
        return bool(self.rejected or self.failed or self.skipped_erased)


class ReadCounts(BaseModel):
    """Files' counts summed (an :class:`IngestSummary`'s, field for field)."""

    model_config = ConfigDict(extra="forbid")

    turns_read: int = 0
    turns_inserted: int = 0
    duplicates_skipped: int = 0
    rejected: int = 0
    identity_conflicts: int = 0
    skipped_empty: int = 0
    skipped_erased: int = 0

    def add(self, counted: BaseModel) -> None:
        for name in type(self).model_fields:
            setattr(self, name, getattr(self, name) + getattr(counted, name))


LISTED_FILES = 100
"""A backfill lists its files one by one up to this many; a run of more lists the files with
rejects, a failure or erased turns, up to as many, and counts the rest."""


class IngestTotals(BaseModel):
    """What one group of files read (an ingest task's result), its size whatever the number of
    files: Prefect walks a task's and a flow's result, once a field, at every state change."""

    model_config = ConfigDict(extra="forbid")

    files_read: int = 0
    counts: ReadCounts = Field(default_factory=lambda: ReadCounts())
    users: list[UserCount] = Field(default_factory=list)
    failed_files: list[str] = Field(default_factory=list)
    listed: list[IngestSummary] = Field(
        default_factory=list,
        description="every file up to LISTED_FILES; beyond, the noteworthy ones up to as many",
    )


class PromotionSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sessions: int = 0
    snapshots_created: int = 0
    turns_promoted: int = 0
    by_reason: dict[str, int] = Field(default_factory=dict)


class BackfillSummary(BaseModel):
    """The backfill flow's result, as ``mempipe backfill --json`` prints it."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    store: str
    files: list[IngestSummary] = Field(
        default_factory=list,
        description=f"every file read, when the run read at most {LISTED_FILES}; else those "
        f"with rejects, a failure or erased turns, up to {LISTED_FILES}",
    )
    files_read: int = Field(default=0, description="all the files the run read")
    turns_read: int = 0
    turns_inserted: int = 0
    duplicates_skipped: int = 0
    rejected: int = 0
    identity_conflicts: IdentityConflicts = 0
    skipped_empty: int = 0
    skipped_erased: int = 0
    failed_files: list[str] = Field(
        default_factory=list, description="files that could not be read to the end: exit 1"
    )
    users: list[UserCount] = Field(
        default_factory=list, description="the users the run's turns were read for, with counts"
    )
    rejects_path: str | None = None
    sessions: int = Field(default=0, description="sessions that gained a snapshot")
    snapshots_created: int = 0
    turns_promoted: int = 0
    embedded: int | None = Field(
        default=None, description="turn vectors added by --embed (None: not asked to embed)"
    )
    embedding_model: str | None = None
    seconds: float = 0.0


class StoreStats(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    turns: int = 0
    unpromoted_turns: int = 0
    sessions: int = 0
    snapshots: dict[str, int] = Field(
        default_factory=dict, description="snapshot count by overall extraction state, and total"
    )
    extraction: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="handler -> extraction status -> count"
    )
    memories: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="memory type -> status -> count"
    )
    failures: dict[str, int] = Field(default_factory=dict, description="failure class -> count")
    runs: dict[str, int] = Field(default_factory=dict, description="run status -> count")
    integrity: list[str] | None = Field(
        default=None,
        description="with --check: what the store's full integrity check found ([] when sound)",
    )
