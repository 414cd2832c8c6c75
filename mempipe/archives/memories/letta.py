"""Letta (MemGPT) archival memory: the passages ``GET /v1/agents/{agent_id}/archival-memory``
returns (a JSON array, or one passage per JSONL line), each ``{"id", "text", "agent_id",
"created_at", "metadata", "tags", ...}``. A passage is a fact its agent kept: a semantic memory
of that agent, its tags kept in its metadata; its embedding is Letta's, never reused."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from mempipe.archives.drafts import Draft, Location, Skipped, reject
from mempipe.archives.formats import JsonFormat
from mempipe.archives.formats.conversation import message_source
from mempipe.archives.json_records import JsonRecord
from mempipe.schemas.archive import FormatKind
from mempipe.schemas.reject import Reject


class Letta(JsonFormat):
    format = "letta"
    kind = FormatKind.MEMORIES

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, record: JsonRecord) -> Iterable[Draft | Reject | Skipped]:
        passages = record.value if isinstance(record.value, list) else [record.value]
        for position, passage in enumerate(passages):
            yield from self._passage(passage, message_source(self.path, record, position))

    def _passage(self, passage: object, source: Location) -> Iterator[Draft | Reject]:
        if not isinstance(passage, dict) or not isinstance(passage.get("text"), str):
            yield reject(source, 'expected a Letta passage: {"id", "text", ...}', passage)
            return
        if passage.get("metadata") is not None and not isinstance(passage["metadata"], dict):
            yield reject(source, "metadata: expected an object", passage)
            return
        metadata = dict(passage.get("metadata") or {})
        if passage.get("tags"):
            metadata["letta_tags"] = passage["tags"]
        yield Draft(
            {
                "source_id": passage.get("id"),
                "text": passage["text"],
                "agent_id": passage.get("agent_id"),
                "created_at": passage.get("created_at"),
                "updated_at": passage.get("updated_at"),
                "metadata": metadata,
            },
            source,
            passage,
        )
