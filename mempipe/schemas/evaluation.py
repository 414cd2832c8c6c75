"""Retrieval evaluation: a labelled queries file, and what `mempipe eval` measures of it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mempipe.schemas.embedding import BridgeUse
from mempipe.schemas.search import SearchMode

GROUP_FIELDS = ("category", "question_type")
"""Fields that group results when a file carries them and no ``--group-by`` is given."""


class EvalQuery(BaseModel):
    """One line of a queries file: the query, the ids that should come back (memory ids, or a
    turn's source message id), and optional identity filters."""

    model_config = ConfigDict(extra="forbid")

    query: str
    relevant_ids: list[str] = Field(min_length=1)
    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    visibility: str | None = None
    group: str | None = Field(default=None, description="the value of the grouping field")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, query: str) -> str:
        if not query.strip():
            raise ValueError("the query is empty")
        return query


class QueryFile(BaseModel):
    """A queries file as read: its queries, the fields it carried that eval does not use (with
    how many lines carried each), and the field results are grouped by."""

    model_config = ConfigDict(extra="forbid")

    queries: list[EvalQuery]
    ignored_fields: dict[str, int] = Field(default_factory=dict)
    group_by: str | None = None


class Scores(BaseModel):
    model_config = ConfigDict(extra="forbid")

    queries: int
    recall: float = Field(description="mean recall at the first k asked for")
    recall_at: dict[int, float] = Field(description="k -> mean recall@k")
    mrr: float = Field(description="mean reciprocal rank of the first relevant hit (largest k)")


class GroupScores(Scores):
    group: str


class EvalResult(Scores):
    source: str
    mode: SearchMode
    k: int = Field(description="the first k asked for")
    model_id: str | None = None
    ignored_fields: dict[str, int] = Field(default_factory=dict)
    group_by: str | None = None
    groups: list[GroupScores] = Field(default_factory=list)
    bridged: int = Field(
        default=0, description="queries the serving model could not embed, answered by a bridge"
    )
    bridge: BridgeUse | None = Field(default=None, description="the first of them's bridge")

    @property
    def warnings(self) -> list[str]:
        if self.bridge is None:
            return []
        return [f"{self.bridged} of {self.queries} queries: {self.bridge.warning}"]


class QueryDetail(BaseModel):
    """One query's outcome, as `--details` writes it: where each relevant id ranked."""

    model_config = ConfigDict(extra="forbid")

    query: str
    user_id: str | None = None
    group: str | None = None
    ranks: dict[str, int | None] = Field(
        description="relevant id -> its 1-based rank within the largest k, or null if not found"
    )
    recall_at: dict[int, float]
    bridge: BridgeUse | None = None
