"""Build the stored record of an extracted memory: ids, versions, visibility defaults.

Ids are derived from what was extracted and where, so a replay killed and started again writes
the very same records.
"""

from __future__ import annotations

from datetime import datetime

from mempipe.domain.ids import stable_id
from mempipe.domain.reconcile import normalize
from mempipe.schemas.extraction import (
    Extracted,
    ExtractedEpisode,
    ExtractedProcedure,
    ExtractedSemantic,
    ExtractedTerm,
    key_of,
    searchable_text,
)
from mempipe.schemas.memory import (
    EpisodicMemory,
    MemoryRecord,
    MemoryType,
    ProceduralMemory,
    SemanticMemory,
    TaxonomicMemory,
)
from mempipe.schemas.transcript import SnapshotContent
from mempipe.schemas.work import ExtractionVersion


def memory_id(memory_type: MemoryType, extracted: Extracted, snapshot: SnapshotContent) -> str:
    """The id of what this snapshot taught: the same on every replay of it. A keyed fact's id
    holds its text as well as its key, so that an extraction that changed (another prompt,
    another model) and reads another value from the same snapshot teaches that value, which
    then updates the one taught before; the same value read again is the same memory."""
    text = normalize(searchable_text(extracted))
    key = key_of(extracted)
    return stable_id(
        "mem",
        memory_type,
        snapshot.org_id,
        snapshot.project_id,
        snapshot.user_id,
        snapshot.snapshot_id,
        *((key, text) if key is not None else (text,)),
    )


def build_record(
    memory_type: MemoryType,
    extracted: Extracted,
    snapshot: SnapshotContent,
    *,
    version: int,
    supersedes_id: str | None,
    embedding_model_id: str | None,
    has_embedding: bool,
    now: datetime,
    extraction: ExtractionVersion | None = None,
) -> MemoryRecord:
    """``extraction``: what extracted it, recorded with the version (none for an import)."""
    text = searchable_text(extracted)
    common = {
        "id": memory_id(memory_type, extracted, snapshot),
        "org_id": snapshot.org_id,
        "project_id": snapshot.project_id,
        "user_id": snapshot.user_id,
        "agent_id": snapshot.agent_id,
        "text": text,
        "version": version,
        "supersedes_id": supersedes_id,
        "evidence": [snapshot.snapshot_id],
        "embedding_model_id": embedding_model_id if has_embedding else None,
        "has_embedding": has_embedding,
        "extractor": extraction.extractor if extraction else None,
        "prompt_version": extraction.prompt_version if extraction else None,
        "created_at": now,
        "updated_at": now,
    }
    match extracted:
        case ExtractedSemantic():
            return SemanticMemory(**common, label=extracted.label)
        case ExtractedEpisode():
            return EpisodicMemory(
                **common, participants=extracted.participants, occurred_at=extracted.occurred_at
            )
        case ExtractedProcedure():
            return ProceduralMemory(
                **common,
                name=extracted.name,
                steps=extracted.steps,
                when_to_use=extracted.when_to_use,
            )
        case ExtractedTerm():
            return TaxonomicMemory(
                **common,
                term=extracted.term,
                definition=extracted.definition,
                domain=extracted.domain,
            )
