"""What an extraction handler returns: one list per memory type, validated before anything is
written. The JSON schemas sent to an LLM as its response format derive from these models."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from mempipe.schemas.memory import MemoryType
from mempipe.schemas.text import sound_text

Text = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=4000),
    AfterValidator(sound_text),
]


class ExtractedSemantic(BaseModel):
    """A fact or preference; ``label`` names what it is about, so a change can be recognised."""

    model_config = ConfigDict(extra="forbid")

    text: Text
    label: Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True)] | None = None


class ExtractedEpisode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: Text
    participants: list[str] = Field(default_factory=list)
    occurred_at: datetime | None = None


class ExtractedProcedure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True, min_length=1)]
    steps: list[Text] = Field(min_length=1)
    when_to_use: str | None = None


class ExtractedTerm(BaseModel):
    model_config = ConfigDict(extra="forbid")

    term: Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True, min_length=1)]
    definition: Text
    domain: str | None = None


Extracted = ExtractedSemantic | ExtractedEpisode | ExtractedProcedure | ExtractedTerm

EXTRACTED_MODELS: dict[MemoryType, type[BaseModel]] = {
    MemoryType.SEMANTIC: ExtractedSemantic,
    MemoryType.EPISODIC: ExtractedEpisode,
    MemoryType.PROCEDURAL: ExtractedProcedure,
    MemoryType.TAXONOMIC: ExtractedTerm,
}


def searchable_text(memory: Extracted) -> str:
    """The text a memory is embedded and searched by."""
    match memory:
        case ExtractedSemantic():
            return memory.text
        case ExtractedEpisode():
            return memory.summary
        case ExtractedProcedure():
            return f"{memory.name}: " + " ".join(memory.steps)
        case ExtractedTerm():
            return f"{memory.term}: {memory.definition}"


def key_of(memory: Extracted) -> str | None:
    """The exact key a memory is matched by (semantic label, procedure name, taxonomic term)."""
    match memory:
        case ExtractedSemantic():
            return memory.label
        case ExtractedProcedure():
            return memory.name
        case ExtractedTerm():
            return memory.term
        case _:
            return None
