"""What the conversation-shaped formats share: session ids, identity and message locations."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from mempipe.archives.drafts import Location, location
from mempipe.archives.formats import first_present
from mempipe.archives.json_records import JsonRecord

IDENTITY_KEYS = ("org_id", "project_id", "user_id", "agent_id")


def session_id_of(conversation: dict[str, Any], *keys: str) -> str:
    """The conversation's own id, or a digest of its content when it has none, so the same
    conversation gets the same session id on every run."""
    given = first_present(conversation, *keys)
    if given is not None:
        return str(given)
    digest = hashlib.sha256(orjson.dumps(conversation, option=orjson.OPT_SORT_KEYS, default=str))
    return f"conv_{digest.hexdigest()[:24]}"


def identity_of(conversation: dict[str, Any]) -> dict[str, Any]:
    return {key: conversation[key] for key in IDENTITY_KEYS if conversation.get(key)}


def record_source(path: str, record: JsonRecord) -> Location:
    return location(path, record.line, record.index)


def message_source(path: str, record: JsonRecord, position: int) -> Location:
    return location(path, record.line, record.index, position)
