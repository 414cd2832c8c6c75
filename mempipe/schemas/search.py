"""Retrieval: what a read asks for and what it gets back."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from mempipe.domain.scope import Scope
from mempipe.schemas.embedding import BridgeUse
from mempipe.schemas.identity import Visibility
from mempipe.schemas.memory import MemoryType


class SearchMode(StrEnum):
    SEMANTIC = "semantic"
    TEXT = "text"
    HYBRID = "hybrid"


STM = "stm"
BUILT_IN_MEMORY_TYPES = frozenset(map(str, MemoryType))


def collection_of(source: str) -> str:
    """The collection a search source lives in: declared custom types share ``custom``."""
    return source if source in BUILT_IN_MEMORY_TYPES or source == STM else "custom"


class Near(BaseModel):
    """A query vector and the model that made it: a vector means nothing without its model."""

    model_config = ConfigDict(frozen=True)

    vector: list[float]
    model_id: str


class CandidateQuery(BaseModel):
    """What reconciliation looks up before it decides: the active records of one type in
    exactly one scope, by key, by nearest vector (the ``k`` nearest), and (``taught_by``) those
    whose evidence holds that snapshot or source record."""

    model_config = ConfigDict(frozen=True)

    memory_type: str
    scope: Scope
    key: str | None = None
    near: Near | None = None
    k: int
    taught_by: str | None = None


class ReadFilter(BaseModel):
    """The identity a read is scoped to. Every field supplied is ANDed into the database query;
    an omitted (None) field leaves that dimension unconstrained. There is no OR: shared and
    private knowledge are two reads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    visibility: Visibility | None = None
    metadata: dict[str, str] = Field(
        default_factory=dict,
        description="qualified partition-key paths to values: {'metadata.engagement_id': 'x'}",
    )


class Hit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    source: str
    score: float
    text: str
    org_id: str
    project_id: str
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    visibility: Visibility | None = None
    message_id: str | None = Field(default=None, description="for turns: the source's own id")
    name: str | None = Field(
        default=None, description="for turns: who spoke, where the archive names them"
    )


class SearchResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str
    source: str
    mode: SearchMode
    hits: list[Hit] = Field(default_factory=list)
    notes: list[str] = Field(
        default_factory=list, description="what the reader should know about how it was answered"
    )
    bridge: BridgeUse | None = Field(
        default=None,
        description="set when the serving model could not embed the query and a bridge did",
    )

    @property
    def warnings(self) -> list[str]:
        return [] if self.bridge is None else [self.bridge.warning]
