"""OpenAI chat shape: ``{"id", "messages": [{"role", "content", ...}]}`` per line or array item."""

from __future__ import annotations

from typing import Any

from mempipe.archives.drafts import Draft, reject, text_of
from mempipe.archives.formats import first_present
from mempipe.archives.formats.conversation import ConversationFormat, Message
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.reject import Reject


class OpenAIChat(ConversationFormat):
    format = ArchiveFormat.OPENAI
    messages_key = "messages"
    id_keys = ("id", "conversation_id", "session_id")

    def shared(self, conversation: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        if isinstance(conversation.get("metadata"), dict):
            return {**fields, "metadata": conversation["metadata"]}
        return fields

    def turn(self, message: Message) -> Draft | Reject:
        raw = message.raw
        tool_calls = raw.get("tool_calls")
        if tool_calls is None and isinstance(raw.get("function_call"), dict):
            tool_calls = [{"type": "function", "function": raw["function_call"]}]
        content = text_of(raw.get("content"))
        if content == "" and not tool_calls:
            return reject(message.source, "empty message: no content and no tool calls", raw)
        return Draft(
            {
                **message.fields,
                "role": raw.get("role"),
                "content": content,
                "created_at": first_present(raw, "created_at", "timestamp", "create_time")
                or first_present(message.conversation, "created_at", "create_time", "created"),
                "message_id": raw.get("id"),
                "name": raw.get("name"),
                "model": raw.get("model") or message.conversation.get("model"),
                "tool_calls": tool_calls,
                "tool_call_id": raw.get("tool_call_id"),
            },
            message.source,
            raw,
        )
