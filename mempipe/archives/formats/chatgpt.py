"""The ChatGPT data export (``conversations.json``).

Each conversation is a tree in ``mapping``; the conversation as the user last saw it is the path
from ``current_node`` up to the root. Branches left by regenerating or editing a message are
not turns. Nodes that carry no message a person saw (the empty root, hidden system context,
custom instructions, model reasoning) are not turns either.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mempipe.archives.drafts import Draft, Skipped, reject
from mempipe.archives.formats import JsonFormat
from mempipe.archives.formats.conversation import (
    message_source,
    record_source,
    session_id_of,
)
from mempipe.archives.json_records import JsonRecord
from mempipe.schemas.archive import ArchiveFormat, FormatKind
from mempipe.schemas.reject import Reject

NOT_TURNS = frozenset(
    {"user_editable_context", "model_editable_context", "thoughts", "reasoning_recap"}
)


def message_text(content: Any) -> Any:
    if not isinstance(content, dict):
        return content
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(p for p in parts if isinstance(p, str))
    for key in ("text", "result", "content"):
        if isinstance(content.get(key), str):
            return content[key]
    return ""


def path_to_current(conversation: dict[str, Any]) -> list[dict[str, Any]] | str:
    """The nodes from the root to ``current_node``, or why they cannot be found."""
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        return "expected a conversation with a 'mapping' object"
    node_id = conversation.get("current_node")
    if node_id not in mapping:
        return f"current_node {node_id!r} is not in the mapping"
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while node_id is not None:
        if node_id in seen:
            return f"the mapping has a cycle at node {node_id!r}"
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            return f"node {node_id!r} is referenced as a parent but not in the mapping"
        seen.add(node_id)
        path.append(node)
        node_id = node.get("parent")
    path.reverse()
    return path


class ChatGPTExport(JsonFormat):
    format = ArchiveFormat.CHATGPT
    kind = FormatKind.TURNS

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool:
        return "mapping" in record and "current_node" in record

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, record: JsonRecord) -> Iterator[Draft | Reject | Skipped]:
        conversation = record.value
        nodes = (
            path_to_current(conversation)
            if isinstance(conversation, dict)
            else "expected a conversation object"
        )
        if isinstance(nodes, str):
            yield reject(record_source(self.path, record), nodes, record)
            return
        session_id = session_id_of(conversation, "conversation_id", "id")
        position = 0
        for node in nodes:
            message = node.get("message")
            if not isinstance(message, dict):
                continue
            if _not_a_turn(message):
                yield Skipped(message_source(self.path, record, position))
                continue
            author = message.get("author") or {}
            metadata = message.get("metadata") or {}
            recipient = message.get("recipient")
            tool_calls = None
            if author.get("role") == "assistant" and recipient not in (None, "all"):
                content_type = (message.get("content") or {}).get("content_type")
                tool_calls = [{"recipient": recipient, "content_type": content_type}]
            yield Draft(
                {
                    "session_id": session_id,
                    "turn_seq": position,
                    "role": author.get("role"),
                    "content": message_text(message.get("content")),
                    "created_at": message.get("create_time"),
                    "message_id": message.get("id"),
                    "name": author.get("name"),
                    "model": metadata.get("model_slug"),
                    "tool_calls": tool_calls,
                },
                message_source(self.path, record, position),
                message,
            )
            position += 1


def _not_a_turn(message: dict[str, Any]) -> bool:
    metadata = message.get("metadata") or {}
    if metadata.get("is_visually_hidden_from_conversation"):
        return True
    content = message.get("content") or {}
    if isinstance(content, dict) and content.get("content_type") in NOT_TURNS:
        return True
    text = message_text(content)
    return isinstance(text, str) and not text.strip() and message.get("recipient") in (None, "all")
