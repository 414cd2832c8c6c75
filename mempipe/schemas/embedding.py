"""The embedding registry: which model serves each collection, and the models there are."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.memory import MEMORY_COLLECTIONS

COLLECTIONS = ("stm", *MEMORY_COLLECTIONS)
"""Everything that carries vectors: the turns, and each long-term memory collection."""


class ModelState(StrEnum):
    SERVING = "serving"
    BUILDING = "building"
    PREVIOUS = "previous"


class RegistryEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    collection: str
    model_id: str
    dimensions: int
    state: ModelState
    vector_table: str


class ModelInfo(BaseModel):
    """A model mempipe can use, as `mempipe models --json` lists it."""

    id: str
    dimensions: int
    active: bool = Field(description="serving at least one collection of this store")
    collections: list[str] = Field(default_factory=list)
