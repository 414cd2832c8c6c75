"""Declared and actual search indexes, as `mempipe rebuild-indexes` reports them."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.embedding import COLLECTIONS, RegistryEntry


class Quantization(StrEnum):
    """How a vector index compares vectors, in Atlas Vector Search's words. A quantized index
    finds its candidates by the quantized vectors and ranks them by the full ones, which the
    store keeps (Atlas keeps them in the documents; SQLite beside the quantized column): scores
    stay cosine similarities, so reconciliation's thresholds mean the same at every setting."""

    NONE = "none"
    """Full 32-bit floats (sqlite-vec ``float``)."""
    SCALAR = "scalar"
    """One byte a dimension (sqlite-vec ``int8``): a quarter of the bytes a search reads."""
    BINARY = "binary"
    """One bit a dimension (sqlite-vec ``bit``, Hamming distance): a thirty-second."""


UNQUANTIZED: Mapping[str, Quantization] = MappingProxyType(
    dict.fromkeys(COLLECTIONS, Quantization.NONE)
)
"""What a store declares until a configuration says otherwise."""


class IndexState(StrEnum):
    OK = "ok"
    ABSENT = "absent"
    DRIFT = "drift"
    CREATED = "created"
    REBUILT = "rebuilt"
    PENDING = "pending"
    """Declared, waiting for a server with search (Atlas, or mongot for MongoDB 8.2+)."""


class IndexStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    collection: str
    kind: str = Field(description="vector or text")
    name: str
    model_id: str | None = None
    state: IndexState
    differences: list[str] = Field(default_factory=list)

    @classmethod
    def of_vectors(cls, entry: RegistryEntry) -> IndexStatus:
        """A registered model's vector index, ``ok`` until a check finds otherwise."""
        return cls(
            collection=entry.collection,
            kind="vector",
            name=entry.vector_table,
            model_id=entry.model_id,
            state=IndexState.OK,
        )


class IndexReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    indexes: list[IndexStatus] = Field(default_factory=list)
    drift: int = 0
    rebuilt: int = 0
    created: int = 0
