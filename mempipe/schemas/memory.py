"""Long-term memories, one collection per type, plus declared custom types."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.identity import IdStr, Visibility


class MemoryType(StrEnum):
    SEMANTIC = "semantic"
    EPISODIC = "episodic"
    PROCEDURAL = "procedural"
    TAXONOMIC = "taxonomic"


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"


class MemorySource(StrEnum):
    EXTRACTION = "extraction"
    DIRECT = "direct"


class MemoryRecord(BaseModel):
    """Fields every long-term memory carries, whatever its type."""

    model_config = ConfigDict(extra="forbid")

    memory_type: ClassVar[str]
    default_visibility: ClassVar[Visibility] = Visibility.PRIVATE
    key_field: ClassVar[str | None] = None
    """The field a memory is matched by exactly in reconciliation (one active record per key and
    scope); None where only similarity matches."""

    id: str
    org_id: IdStr
    project_id: IdStr
    user_id: IdStr | None = None
    agent_id: IdStr | None = None
    session_id: IdStr | None = Field(default=None, description="null on episodic memories")
    visibility: Visibility = Visibility.PRIVATE
    text: str = Field(description="the searchable text")
    embedding: list[float] | None = None
    embedding_model_id: str | None = None
    has_embedding: bool = False
    status: MemoryStatus = MemoryStatus.ACTIVE
    version: int = Field(default=1, ge=1)
    supersedes_id: str | None = None
    reinforcement_count: int = Field(default=0, ge=0)
    evidence: list[str] = Field(default_factory=list, description="snapshot ids that taught it")
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: MemorySource = MemorySource.EXTRACTION
    extractor: str | None = Field(
        default=None, description="the extractor (with its model) that wrote this version"
    )
    prompt_version: str | None = Field(
        default=None, description="the prompt it ran with (an extractor with prompts)"
    )
    created_at: datetime
    updated_at: datetime


class SemanticMemory(MemoryRecord):
    memory_type: ClassVar[str] = MemoryType.SEMANTIC
    key_field: ClassVar[str | None] = "label"
    label: str | None = None


class EpisodicMemory(MemoryRecord):
    memory_type: ClassVar[str] = MemoryType.EPISODIC
    participants: list[str] = Field(default_factory=list)
    occurred_at: datetime | None = None


class ProceduralMemory(MemoryRecord):
    memory_type: ClassVar[str] = MemoryType.PROCEDURAL
    key_field: ClassVar[str | None] = "name"
    name: str
    steps: list[str] = Field(default_factory=list)
    when_to_use: str | None = None


class TaxonomicMemory(MemoryRecord):
    memory_type: ClassVar[str] = MemoryType.TAXONOMIC
    key_field: ClassVar[str | None] = "term"
    default_visibility: ClassVar[Visibility] = Visibility.ORG
    visibility: Visibility = Visibility.ORG
    term: str
    definition: str
    domain: str | None = None


class CustomMemory(MemoryRecord):
    """A record of a project-declared custom type; its tags follow the declaration."""

    memory_type: ClassVar[str] = "custom"
    type_name: str
    tags: dict[str, Any] = Field(default_factory=dict)


MEMORY_MODELS: dict[str, type[MemoryRecord]] = {
    MemoryType.SEMANTIC: SemanticMemory,
    MemoryType.EPISODIC: EpisodicMemory,
    MemoryType.PROCEDURAL: ProceduralMemory,
    MemoryType.TAXONOMIC: TaxonomicMemory,
}

KEY_FIELDS: dict[str, str] = {
    str(memory_type): model.key_field
    for memory_type, model in MEMORY_MODELS.items()
    if model.key_field is not None
}
"""Memory type → the field it is matched by exactly (semantic label, procedure name, term)."""
MEMORY_COLLECTIONS: tuple[str, ...] = (*map(str, MEMORY_MODELS), CustomMemory.memory_type)
"""One collection per long-term memory type, and one for every declared custom type."""
