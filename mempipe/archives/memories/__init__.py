"""Long-term memories of other systems read as mempipe memories, streaming: mem0 (what
``get_all`` returns, ``{"results": [...]}`` or a bare list, and mem0's export), LangGraph
``BaseStore`` items (LangMem's memory values included), and mempipe's own memory JSONL."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError

from mempipe.archives.drafts import Draft, Skipped, identity_reject, reject
from mempipe.archives.formats import JsonFormat, RecordParser
from mempipe.archives.formats.conversation import message_source, record_source
from mempipe.archives.json_records import JsonRecord
from mempipe.archives.reader import ArchiveReader
from mempipe.archives.registry import format_class
from mempipe.domain.identity import settle_identity
from mempipe.schemas.archive import FormatKind
from mempipe.schemas.errors import describe
from mempipe.schemas.extraction import EXTRACTED_MODELS
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.memory_import import ImportedMemory, MemoryFormat
from mempipe.schemas.reject import Reject

MEM0_WRAPPERS = ("results", "memories")
"""Keys under which a mem0 document holds its memories (``get_all``, exports)."""
MEM0_FIELDS = frozenset(
    {
        "id",
        "memory",
        "hash",
        "user_id",
        "agent_id",
        "app_id",
        "run_id",
        "metadata",
        "categories",
        "created_at",
        "updated_at",
        "score",
        "immutable",
        "expiration_date",
        "owner",
        "organization",
        "input",
    }
)
"""mem0's memory fields (docs.mem0.ai, "Get all memories" / "Memory export")."""
TEXT_KEYS = ("content", "text", "memory", "fact")
"""Where a LangGraph item's value holds its text (LangMem: ``{"content": ...}``, or
``{"kind": "Memory", "content": {"content": ...}}``)."""
FREE_TEXT_TYPES = (MemoryType.SEMANTIC, MemoryType.EPISODIC)
"""Types a memory that is only text can be: a fact, or an event."""


def mem0_drafts(path: str) -> RecordParser:
    def parse(record: JsonRecord) -> Iterator[Draft | Reject]:
        value = record.value
        if isinstance(value, dict) and any(isinstance(value.get(k), list) for k in MEM0_WRAPPERS):
            items = next(value[k] for k in MEM0_WRAPPERS if isinstance(value.get(k), list))
        else:
            items = [value]
        for position, item in enumerate(items, start=record.position or 0):
            source = message_source(path, record, position)
            if not isinstance(item, dict) or not isinstance(item.get("memory"), str):
                yield reject(source, 'expected a mem0 memory: {"id", "memory", ...}', item)
                continue
            if item.get("metadata") is not None and not isinstance(item["metadata"], dict):
                yield reject(source, "metadata: expected an object", item)
                continue
            metadata = dict(item.get("metadata") or {})
            for extra in ("categories", "app_id", "hash"):
                if item.get(extra) is not None:
                    metadata[f"mem0_{extra}"] = item[extra]
            yield Draft(
                {
                    "source_id": item.get("id"),
                    "text": item["memory"],
                    "user_id": item.get("user_id"),
                    "agent_id": item.get("agent_id"),
                    "session_id": item.get("run_id"),
                    "created_at": item.get("created_at"),
                    "updated_at": item.get("updated_at"),
                    "metadata": metadata,
                },
                source,
                item,
            )

    return parse


def langgraph_drafts(path: str) -> RecordParser:
    def parse(record: JsonRecord) -> Iterator[Draft | Reject]:
        item = record.value
        source = record_source(path, record)
        if not isinstance(item, dict) or "value" not in item or "key" not in item:
            yield reject(
                source, 'expected a LangGraph store item: {"namespace", "key", "value"}', record
            )
            return
        text = value_text(item["value"])
        if text is None:
            yield reject(source, "the item's value holds no text (content, text, memory)", record)
            return
        namespace = [str(n) for n in item.get("namespace") or []]
        yield Draft(
            {
                "source_id": "/".join([*namespace, str(item["key"])]),
                "text": text,
                "user_id": namespace[-1] if len(namespace) > 1 else None,
                "created_at": item.get("created_at"),
                "updated_at": item.get("updated_at"),
                "metadata": {"langgraph_namespace": namespace},
            },
            source,
            record,
        )

    return parse


def value_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return None
    for key in TEXT_KEYS:
        found = value.get(key)
        if isinstance(found, str) and found.strip():
            return found
        if isinstance(found, dict):
            nested = value_text(found)
            if nested:
                return nested
    return None


def memory_drafts(path: str) -> RecordParser:
    """mempipe's memory JSONL: identity, ``memory_type``, ``id``, times, ``metadata`` and the
    type's own fields (semantic: text, label; episodic: summary, participants, occurred_at;
    procedural: name, steps, when_to_use; taxonomic: term, definition, domain)."""

    def parse(record: JsonRecord) -> Iterator[Draft | Reject]:
        source = record_source(path, record)
        if not isinstance(record.value, dict):
            yield reject(source, "expected a JSON object holding one memory", record)
            return
        fields = dict(record.value)
        fields["source_id"] = fields.pop("id", None)
        yield Draft(fields, source, record)

    return parse


class MemoryFormatBase(JsonFormat):
    """A format of another system's memories: its records parsed by ``parse(path)``.
    ``typed``: its records carry mempipe's own fields, a memory type among them (else a memory
    is text: a fact, or an event)."""

    kind = FormatKind.MEMORIES
    typed: ClassVar[bool] = False
    parse: ClassVar[Callable[[str], RecordParser]]

    def __init__(self, path: str) -> None:
        self.parser = type(self).parse(path)

    def __call__(self, record: JsonRecord) -> Iterable[Draft | Reject | Skipped]:
        return self.parser(record)


class Mem0(MemoryFormatBase):
    format = MemoryFormat.MEM0
    parse = staticmethod(mem0_drafts)
    record_keys = MEM0_WRAPPERS


class LangGraph(MemoryFormatBase):
    format = MemoryFormat.LANGGRAPH
    parse = staticmethod(langgraph_drafts)


class Memories(MemoryFormatBase):
    format = MemoryFormat.MEMORIES
    typed = True
    parse = staticmethod(memory_drafts)


IDENTITY = ("org_id", "project_id", "user_id", "agent_id", "session_id")
OWN_FIELDS = frozenset(
    {"source_id", "memory_type", *IDENTITY, "created_at", "updated_at", "metadata"}
)


def finish_memory(
    draft: Draft, format: str, defaults: IdentityDefaults, memory_type: MemoryType | None
) -> ImportedMemory | Reject:
    """The record's identity settled with the one given (:mod:`mempipe.domain.identity`). Its
    type is its own (mempipe's format), else ``memory_type``, else semantic."""
    fields = draft.fields
    conflict = settle_identity(fields, defaults, IDENTITY)
    if conflict is not None:
        return identity_reject(draft, conflict)
    try:
        kind = MemoryType(fields.get("memory_type") or memory_type or MemoryType.SEMANTIC)
    except ValueError:
        return reject(
            draft.source, f"unknown memory_type {fields.get('memory_type')!r}", draft.original
        )
    own = {k: v for k, v in fields.items() if k not in OWN_FIELDS}
    if not getattr(format_class(format), "typed", False):  # a plug-in's records are text
        if kind not in FREE_TEXT_TYPES:
            return reject(
                draft.source,
                f"{format} memories are text: {kind} needs the memories format",
                draft.original,
            )
        own = {"text": own["text"]} if kind is MemoryType.SEMANTIC else {"summary": own["text"]}
    elif kind is MemoryType.EPISODIC and "text" in own and "summary" not in own:
        own["summary"] = own.pop("text")
    try:
        return ImportedMemory(
            source_system=format,
            memory_type=kind,
            memory=EXTRACTED_MODELS[kind].model_validate(own),
            source=draft.source,
            **{
                k: fields.get(k)
                for k in OWN_FIELDS
                if k not in ("memory_type",) and fields.get(k) is not None
            },
        )
    except ValidationError as exc:
        return reject(draft.source, describe(exc), draft.original)


class MemoryArchiveReader(ArchiveReader):
    """One file's memories and rejects, read as :class:`ArchiveReader` reads turns (streamed,
    compressed or not, a broken file one reject with its offset)."""

    def __init__(
        self,
        path: Path,
        format: str,
        defaults: IdentityDefaults,
        memory_type: MemoryType | None = None,
    ) -> None:
        super().__init__(path, format, defaults)
        self.memory_format = format
        self.memory_type = memory_type

    def _finish(self, draft: Draft) -> ImportedMemory | Reject:  # type: ignore[override]
        return finish_memory(draft, self.memory_format, self.defaults, self.memory_type)
