"""The Claude.ai data export (``conversations.json``): ``chat_messages`` with ``sender`` human or
assistant, text in ``content`` blocks (older exports: ``text``); a ``sender_name``, where present,
is the speaker's name."""

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


class ClaudeExport(JsonFormat):
    format = ArchiveFormat.CLAUDE
    kind = FormatKind.TURNS

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool:
        return "chat_messages" in record

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, record: JsonRecord) -> Iterator[Draft | Reject]:
        conversation = record.value
        if not isinstance(conversation, dict) or not isinstance(
            conversation.get("chat_messages"), list
        ):
            source = record_source(self.path, record)
            yield reject(source, 'expected {"uuid", "chat_messages": [...]}', record)
            return
        shared: dict[str, Any] = {
            **identity_of(conversation),
            "session_id": session_id_of(conversation, "uuid", "id"),
        }
        account = conversation.get("account")
        if isinstance(account, dict) and account.get("uuid") and "user_id" not in shared:
            shared["user_id"] = account["uuid"]
        for position, message in enumerate(conversation["chat_messages"]):
            source = message_source(self.path, record, position)
            if not isinstance(message, dict):
                yield reject(source, "expected a message object", message)
                continue
            text, calls = blocks_text(message), tool_uses(message)
            if text == "" and not calls:
                yield reject(source, "empty message: no text and no tool use", message)
                continue
            yield Draft(
                {
                    **shared,
                    "turn_seq": position,
                    "role": message.get("sender"),
                    "name": message.get("sender_name"),
                    "content": text,
                    "created_at": message.get("created_at"),
                    "message_id": message.get("uuid"),
                    "tool_calls": calls,
                },
                source,
                message,
            )
