"""A portable bundle of a store (or of one org, project or user): one Parquet dataset per
collection and a manifest that says what it holds and how to check it."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.audit import AuditRow
from mempipe.schemas.embedding import RegistryEntry
from mempipe.schemas.failure import Failure
from mempipe.schemas.memory import MEMORY_COLLECTIONS, MEMORY_MODELS, CustomMemory
from mempipe.schemas.run import RunRecord
from mempipe.schemas.snapshot import Snapshot
from mempipe.schemas.summaries import UserCount
from mempipe.schemas.turn import Turn

BUNDLE_FORMAT = 1
"""Raised when a bundle's layout changes in a way an older reader cannot follow."""

BUNDLE_MODELS: dict[str, type[BaseModel]] = {
    "runs": RunRecord,
    "turns": Turn,
    "snapshots": Snapshot,
    **{str(t): model for t, model in MEMORY_MODELS.items()},
    "custom": CustomMemory,
    "audit": AuditRow,
    "failures": Failure,
}
"""Each collection of a bundle and the model its rows are, in the order an import writes them
(runs first: the audit and failures of a run the target already holds are not written twice)."""


def store_collection(collection: str) -> str:
    """A bundle collection's name in a store, where it differs: turns are ``stm`` there."""
    return "stm" if collection == "turns" else collection


def bundle_collection(collection: str) -> str:
    """A store collection's name in a bundle: ``stm`` is ``turns`` there."""
    return "turns" if collection == "stm" else collection


NOT_DIGESTED: dict[str, frozenset[str]] = {
    name: frozenset({"embedding", "has_embedding", "embedding_model_id"})
    for name in MEMORY_COLLECTIONS
}
"""Fields left out of a collection's digest: which model embeds a memory depends on the store
that holds it, not on what the memory is."""


REDACTED = "[erased]"
"""What an erased user's audit text becomes."""


class BundleSelection(BaseModel):
    """What a bundle holds: every given field narrows it (AND)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bundle_format: int = BUNDLE_FORMAT
    mempipe_version: str
    source_store: str = Field(description="the kind of store it came from: sqlite or mongodb")
    selection: BundleSelection
    counts: dict[str, int]
    digests: dict[str, str] = Field(
        description="per collection, order-independent, over the canonical fields: the same "
        "records give the same digest on any backend"
    )
    vectors: dict[str, str] = Field(
        default_factory=dict, description="collection -> the model whose vectors the bundle holds"
    )
    registry: list[RegistryEntry] = Field(default_factory=list)
    partition_keys: list[str] = Field(default_factory=list)
    custom_types: list[str] = Field(default_factory=list)


class ExportSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out: str
    counts: dict[str, int]
    digests: dict[str, str]
    vectors: dict[str, int] = Field(default_factory=dict)
    seconds: float


class BundleImportSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    source: str
    written: dict[str, int] = Field(default_factory=dict)
    duplicates_skipped: dict[str, int] = Field(default_factory=dict)
    conflicts: int = 0
    rejects_path: str | None = None
    vectors_reused: int = 0
    without_vector: int = 0
    digests_match: bool
    digest_differences: list[str] = Field(default_factory=list)
    users: list[UserCount] = Field(
        default_factory=list,
        description="the users whose turns and memories the bundle holds, with how many each",
    )
    seconds: float


class ErasedFile(BaseModel):
    """A file or folder outside the store that held the user's text: redacted, or left with
    the reason an erase could not redact it."""

    model_config = ConfigDict(extra="forbid")

    path: str
    kind: str
    rows: int = Field(description="the user's rows or lines in it")
    parts: int = Field(default=1, description="the files of a folder that held them")
    left: str | None = Field(default=None, description="why it still holds them, if it does")


class EraseSummary(BaseModel):
    """What one user's erase removed (or, dry, would remove): counts and paths, no content."""

    model_config = ConfigDict(extra="forbid")

    run_id: str | None = None
    selection: BundleSelection
    dry_run: bool
    counts: dict[str, int]
    audit_files: int = Field(description="Parquet audit files that held the user's text")
    audit_file_rows: int
    files: list[ErasedFile] = Field(
        default_factory=list,
        description="every recorded audit folder, rejects file and bundle that held the user's "
        "text; any with ``left`` set fails the erase (exit 1) until it is dealt with",
    )
    seconds: float

    @property
    def left(self) -> list[ErasedFile]:
        return [f for f in self.files if f.left is not None]


class StoredUser(BaseModel):
    """A user a store holds records of: what ``mempipe users`` lists, and an erase is checked
    against."""

    model_config = ConfigDict(extra="forbid")

    org_id: str
    project_id: str
    user_id: str | None
    turns: int = 0
    memories: int = Field(default=0, description="long-term records, every version and type")
    first_seen: datetime | None = Field(default=None, description="the earliest record's time")
    last_seen: datetime | None = Field(default=None, description="the latest record's time")


class UsersReport(BaseModel):
    """``mempipe users``: the store's users within the scope asked, and those erased."""

    model_config = ConfigDict(extra="forbid")

    store: str
    selection: BundleSelection
    users: list[StoredUser]
    erased: list[BundleSelection] = Field(
        default_factory=list, description="the owners erased from the store (the erase fence)"
    )


class CopySummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    source: str
    target: str
    copied: dict[str, int] = Field(description="records written per collection by this run")
    rejected: int = 0
    rejects_path: str | None = None
    verified: bool = Field(description="every collection's count and digest agree")
    differences: list[str] = Field(default_factory=list)
    digests: dict[str, str] = Field(description="the source's digest per collection")
    vectors: dict[str, int] = Field(
        default_factory=dict, description="vectors copied per collection (--with-vectors)"
    )
    seconds: float
