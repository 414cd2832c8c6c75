"""From a parsed source record to a validated :class:`Turn`, or to a :class:`Reject` saying why.

Format parsers produce drafts (canonical field names, source location, the original record);
this module settles identity (:mod:`mempipe.domain.identity`), normalises roles and validates,
the same for every format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import orjson
from pydantic import ValidationError

from mempipe.archives.json_records import JsonRecord
from mempipe.domain.identity import settle_identity
from mempipe.schemas.errors import describe
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import Turn

ROLE_ALIASES: dict[str, str] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "ai": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
    "observation": "tool",
    "function_response": "tool",
}


class Location(TypedDict):
    """Where a draft was read; validated into :class:`SourceLocation` with the turn itself (a
    plain dict here, because building a model per record on the hot path costs more than the
    rest of the record's validation)."""

    path: str
    line: int | None
    index: int | None
    message_index: int | None


def location(
    path: str, line: int | None = None, index: int | None = None, message_index: int | None = None
) -> Location:
    return {"path": path, "line": line, "index": index, "message_index": message_index}


@dataclass(slots=True)
class Draft:
    fields: dict[str, Any]
    source: Location
    original: Any


@dataclass(slots=True)
class Skipped:
    """A message that is not a turn (hidden context, model reasoning, no visible text): counted
    as ``skipped_empty``, so that every record read is accounted for."""

    source: Location


def render_raw(original: Any) -> str:
    if isinstance(original, JsonRecord):
        return original.raw()
    if isinstance(original, str):
        return original
    return orjson.dumps(original, default=str).decode()


def reject(source: Location, reason: str, original: Any) -> Reject:
    return Reject(**source, reason=reason, raw=render_raw(original))


def identity_reject(draft: Draft, reason: str) -> Reject:
    rejected = reject(draft.source, reason, draft.original)
    rejected.identity_conflict = True
    return rejected


def normalize_role(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return ROLE_ALIASES.get(value.strip().lower())


def finish(draft: Draft, defaults: IdentityDefaults) -> Turn | Reject:
    fields = draft.fields
    if fields.get("metadata") is None:
        fields.pop("metadata", None)
    conflict = settle_identity(fields, defaults)
    if conflict is not None:
        return identity_reject(draft, conflict)
    role = fields.get("role")
    normalized = normalize_role(role)
    if normalized is None:
        reason = "missing role" if role is None else f"unknown role {role!r}"
        return reject(draft.source, reason, draft.original)
    fields["role"] = normalized
    fields["source"] = draft.source
    try:
        return Turn.model_validate(fields)
    except ValidationError as exc:
        return reject(draft.source, describe(exc), draft.original)


def text_of(content: Any) -> Any:
    """Plain text of a message's content: a string, or a list of text parts (OpenAI and Claude
    style). Anything else is returned as it is, for validation to reject."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts)
    return content
