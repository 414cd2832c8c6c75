"""ShareGPT: ``{"id", "conversations": [{"from", "value"}]}``, optionally with a ``system``
prompt; ``function_call`` turns are the assistant calling a tool, ``observation`` its result."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mempipe.archives.drafts import Draft, reject
from mempipe.archives.formats import JsonFormat
from mempipe.archives.formats.conversation import (
    identity_of,
    message_source,
    record_source,
    session_id_of,
)
from mempipe.archives.json_records import JsonRecord
from mempipe.schemas.archive import ArchiveFormat, FormatKind
from mempipe.schemas.reject import Reject


class ShareGPT(JsonFormat):
    format = ArchiveFormat.SHAREGPT
    kind = FormatKind.TURNS

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool:
        return isinstance(record.get("conversations"), list)

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, record: JsonRecord) -> Iterator[Draft | Reject]:
        conversation = record.value
        if not isinstance(conversation, dict) or not isinstance(
            conversation.get("conversations"), list
        ):
            source = record_source(self.path, record)
            yield reject(source, 'expected {"id", "conversations": [...]}', record)
            return
        shared = {
            **identity_of(conversation),
            "session_id": session_id_of(conversation, "id", "conversation_id"),
        }
        messages: list[Any] = list(conversation["conversations"])
        if isinstance(conversation.get("system"), str) and conversation["system"].strip():
            messages.insert(0, {"from": "system", "value": conversation["system"]})
        for position, message in enumerate(messages):
            source = message_source(self.path, record, position)
            if not isinstance(message, dict):
                yield reject(source, "expected a {'from', 'value'} object", message)
                continue
            role, tool_calls = message.get("from"), None
            if role == "function_call":
                role, tool_calls = "assistant", [{"type": "function_call"}]
            yield Draft(
                {
                    **shared,
                    "turn_seq": position,
                    "role": role,
                    "content": message.get("value"),
                    "tool_calls": tool_calls,
                },
                source,
                message,
            )
