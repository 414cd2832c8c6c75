"""ShareGPT: ``{"id", "conversations": [{"from", "value"}]}``, optionally with a ``system``
prompt; ``function_call`` turns are the assistant calling a tool, ``observation`` its result."""

from __future__ import annotations

from typing import Any

from mempipe.archives.drafts import Draft
from mempipe.archives.formats.conversation import ConversationFormat, Message
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.reject import Reject


class ShareGPT(ConversationFormat):
    format = ArchiveFormat.SHAREGPT
    messages_key = "conversations"
    id_keys = ("id", "conversation_id")
    message_shape = "a {'from', 'value'} object"

    def messages(self, conversation: dict[str, Any]) -> list[Any]:
        messages = super().messages(conversation)
        if isinstance(conversation.get("system"), str) and conversation["system"].strip():
            return [{"from": "system", "value": conversation["system"]}, *messages]
        return messages

    def turn(self, message: Message) -> Draft | Reject:
        role, tool_calls = message.raw.get("from"), None
        if role == "function_call":
            role, tool_calls = "assistant", [{"type": "function_call"}]
        return Draft(
            {
                **message.fields,
                "role": role,
                "content": message.raw.get("value"),
                "tool_calls": tool_calls,
            },
            message.source,
            message.raw,
        )
