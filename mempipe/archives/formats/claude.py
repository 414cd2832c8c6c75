"""The Claude.ai data export (``conversations.json``): ``chat_messages`` with ``sender`` human or
assistant, text in ``content`` blocks (older exports: ``text``); a ``sender_name``, where present,
is the speaker's name."""

from __future__ import annotations

from typing import Any

from mempipe.archives.drafts import Draft, reject
from mempipe.archives.formats.conversation import ConversationFormat, Message
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.reject import Reject


def blocks_text(message: dict[str, Any]) -> Any:
    blocks = message.get("content")
    if isinstance(blocks, list) and blocks:
        return "\n".join(
            b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return message.get("text", "")


def tool_uses(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    blocks = message.get("content")
    if not isinstance(blocks, list):
        return None
    uses = [
        {"type": "tool_use", "name": b.get("name"), "input": b.get("input")}
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    return uses or None


class ClaudeExport(ConversationFormat):
    format = ArchiveFormat.CLAUDE
    messages_key = "chat_messages"
    id_keys = ("uuid", "id")

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool:
        return "chat_messages" in record

    def shared(self, conversation: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        account = conversation.get("account")
        if isinstance(account, dict) and account.get("uuid") and "user_id" not in fields:
            return {**fields, "user_id": account["uuid"]}
        return fields

    def turn(self, message: Message) -> Draft | Reject:
        raw = message.raw
        text, calls = blocks_text(raw), tool_uses(raw)
        if text == "" and not calls:
            return reject(message.source, "empty message: no text and no tool use", raw)
        return Draft(
            {
                **message.fields,
                "role": raw.get("sender"),
                "name": raw.get("sender_name"),
                "content": text,
                "created_at": raw.get("created_at"),
                "message_id": raw.get("uuid"),
                "tool_calls": calls,
            },
            message.source,
            raw,
        )
