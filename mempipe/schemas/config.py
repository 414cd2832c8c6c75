"""The project configuration read from ``project-config.yaml``."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mempipe.domain.partition_keys import SEGMENT, partition_key_problem
from mempipe.domain.reconcile import ReconcileThresholds
from mempipe.schemas.costs import CostConfig
from mempipe.schemas.embedding import COLLECTIONS, ModelEndpoint, ModelOptions
from mempipe.schemas.indexes import Quantization
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.prompts import OfflineRule, Prompt
from mempipe.schemas.retention import RetentionPolicy

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> Any:
    """Accept ``30m``, ``2h``, ``45s``, ``1d`` besides what pydantic reads as a timedelta."""
    if isinstance(value, str) and (match := _DURATION.match(value)):
        return timedelta(seconds=float(match[1]) * _UNIT_SECONDS[match[2]])
    return value


class ExtractionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: list[MemoryType] = Field(
        default_factory=lambda: list(MemoryType),
        description="handlers the background extraction runs; others can still be written directly",
    )
    prompts: dict[MemoryType, Prompt] = Field(
        default_factory=dict,
        description="a handler's own prompt for an LLM extractor, over the built-in one",
    )
    offline_rules: list[OfflineRule] = Field(
        default_factory=list,
        description="semantic facts the offline extractor reads beside its built-in rules; "
        "they version its name (offline-rules-v2+rules@<hash>)",
    )
    kept_answers: str = Field(
        default="kept-answers",
        description="where `replay --preview` keeps the provider's answers for the replay that "
        "follows (relative to the configuration's folder); an erase removes the user's",
    )


class PromotionLimits(BaseModel):
    """When a session's unpromoted turns become a snapshot."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_messages: int = Field(default=20, ge=1, description="cut when this many turns are waiting")
    idle_period: timedelta = Field(
        default=timedelta(minutes=30),
        description="cut when the next turn comes more than this long after the last one",
    )

    _parse_idle = field_validator("idle_period", mode="before")(parse_duration)

    @field_validator("idle_period")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("idle_period must be positive")
        return value


class CustomTypeConfig(BaseModel):
    """A declared custom memory type. Write-once: change it by declaring a new name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    tags: dict[str, str] = Field(default_factory=dict, description="tag name to value type")
    description: str | None = None

    @field_validator("name")
    @classmethod
    def _syntax(cls, value: str) -> str:
        if value in set(MemoryType) or value == "stm":
            raise ValueError(f"{value!r} is a built-in memory type")
        if not SEGMENT.match(value):
            raise ValueError(f"custom type name {value!r} does not match {SEGMENT.pattern}")
        return value


class EmbeddingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = "all-MiniLM-L6-v2"
    dimensions: int | None = Field(default=None, ge=1)
    options: dict[str, ModelOptions] = Field(
        default_factory=dict,
        description="a provider model's request options, by model id (openai:<model>:<N>)",
    )
    endpoints: dict[str, ModelEndpoint] = Field(
        default_factory=dict,
        description="an openai: model's own endpoint and key source, by model id (none: the "
        "extractor's endpoint and key)",
    )

    @field_validator("endpoints")
    @classmethod
    def _openai_models(cls, endpoints: dict[str, ModelEndpoint]) -> dict[str, ModelEndpoint]:
        others = sorted(m for m in endpoints if not m.startswith("openai:"))
        if others:
            raise ValueError(f"only openai: models are asked at an endpoint, not {others}")
        return endpoints


class VectorIndexConfig(BaseModel):
    """How the vector indexes are built. Changeable: a changed quantization leaves the indexes
    drifted until ``mempipe rebuild-indexes --force`` rebuilds them from the kept vectors."""

    model_config = ConfigDict(extra="forbid")

    quantization: Quantization = Quantization.NONE
    collections: dict[str, Quantization] = Field(
        default_factory=dict, description="a collection's own quantization, over the default"
    )

    @field_validator("collections")
    @classmethod
    def _known(cls, collections: dict[str, Quantization]) -> dict[str, Quantization]:
        unknown = sorted(set(collections) - set(COLLECTIONS))
        if unknown:
            raise ValueError(f"unknown collections {unknown}; known: {', '.join(COLLECTIONS)}")
        return collections

    def declared(self) -> dict[str, Quantization]:
        """Every collection's quantization."""
        return {c: self.collections.get(c, self.quantization) for c in COLLECTIONS}


class MemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    extraction: ExtractionConfig = Field(default_factory=ExtractionConfig)
    promotion: PromotionLimits = Field(default_factory=PromotionLimits)
    metadata_partition_keys: list[str] = Field(
        default_factory=list, description="declared filterable metadata keys (write-once)"
    )
    custom_types: list[CustomTypeConfig] = Field(default_factory=list)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    vector_index: VectorIndexConfig = Field(default_factory=VectorIndexConfig)
    reconcile: ReconcileThresholds = Field(default_factory=ReconcileThresholds)
    retention: RetentionPolicy | None = Field(
        default=None,
        description="what mempipe forget forgets, and search no longer finds (none: nothing)",
    )

    @field_validator("metadata_partition_keys")
    @classmethod
    def _keys(cls, keys: list[str]) -> list[str]:
        problems = [p for key in keys if (p := partition_key_problem(key))]
        if problems:
            raise ValueError("; ".join(problems))
        if len(set(keys)) != len(keys):
            raise ValueError("metadata_partition_keys lists a key twice")
        return keys


class ProjectConfig(BaseModel):
    """``project-config.yaml``: the project's identity defaults and memory configuration."""

    model_config = ConfigDict(extra="forbid")

    org_id: str | None = None
    project_id: str | None = None
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    costs: CostConfig = Field(default_factory=CostConfig)
