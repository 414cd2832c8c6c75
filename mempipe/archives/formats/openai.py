"""OpenAI chat shape: ``{"id", "messages": [{"role", "content", ...}]}`` per line or array item."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mempipe.archives.drafts import Draft, reject, text_of
from mempipe.archives.formats import JsonFormat, first_present
from mempipe.archives.formats.conversation import (
    identity_of,
    message_source,
    record_source,
    session_id_of,
)
from mempipe.archives.json_records import JsonRecord
from mempipe.schemas.archive import ArchiveFormat, FormatKind
from mempipe.schemas.reject import Reject


class OpenAIChat(JsonFormat):
    format = ArchiveFormat.OPENAI
    kind = FormatKind.TURNS

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool:
        return isinstance(record.get("messages"), list)

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, record: JsonRecord) -> Iterator[Draft | Reject]:
        conversation = record.value
        if not isinstance(conversation, dict) or not isinstance(conversation.get("messages"), list):
            source = record_source(self.path, record)
            yield reject(source, 'expected {"id", "messages": [...]}', record)
            return
        shared: dict[str, Any] = {
            **identity_of(conversation),
            "session_id": session_id_of(conversation, "id", "conversation_id", "session_id"),
        }
        if isinstance(conversation.get("metadata"), dict):
            shared["metadata"] = conversation["metadata"]
        conversation_time = first_present(conversation, "created_at", "create_time", "created")
        for position, message in enumerate(conversation["messages"]):
            source = message_source(self.path, record, position)
            if not isinstance(message, dict):
                yield reject(source, "expected a message object", message)
                continue
            tool_calls = message.get("tool_calls")
            if tool_calls is None and isinstance(message.get("function_call"), dict):
                tool_calls = [{"type": "function", "function": message["function_call"]}]
            content = text_of(message.get("content"))
            if content == "" and not tool_calls:
                yield reject(source, "empty message: no content and no tool calls", message)
                continue
            yield Draft(
                {
                    **shared,
                    "turn_seq": position,
                    "role": message.get("role"),
                    "content": content,
                    "created_at": first_present(message, "created_at", "timestamp", "create_time")
                    or conversation_time,
                    "message_id": message.get("id"),
                    "name": message.get("name"),
                    "model": message.get("model") or conversation.get("model"),
                    "tool_calls": tool_calls,
                    "tool_call_id": message.get("tool_call_id"),
                },
                source,
                message,
            )
