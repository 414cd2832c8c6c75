"""What the conversation-shaped formats share: one conversation a record, its session id and
identity, each message a turn at its own place (or a reject there)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from mempipe.archives.drafts import Draft, Location, location, reject
from mempipe.archives.formats import JsonFormat, first_present
from mempipe.archives.json_records import JsonRecord
from mempipe.schemas.archive import FormatKind
from mempipe.schemas.reject import Reject

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


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation, with the fields its turn takes from the conversation
    (identity, session, position) and its place in the file."""

    raw: dict[str, Any]
    conversation: dict[str, Any]
    fields: dict[str, Any]
    source: Location


class ConversationFormat(JsonFormat):
    """A format whose record is one conversation, its messages a list under ``messages_key`` and
    its id under the first of ``id_keys`` present. A record of another shape, or a message that
    is not an object, is a reject at its place; the rest of the file goes on."""

    kind = FormatKind.TURNS
    messages_key: ClassVar[str]
    id_keys: ClassVar[tuple[str, ...]]
    message_shape: ClassVar[str] = "a message object"

    @classmethod
    def recognises(cls, record: dict[str, Any]) -> bool:
        return isinstance(record.get(cls.messages_key), list)

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, record: JsonRecord) -> Iterator[Draft | Reject]:
        conversation = record.value
        if not isinstance(conversation, dict) or not isinstance(
            conversation.get(self.messages_key), list
        ):
            expected = f'expected {{"{self.id_keys[0]}", "{self.messages_key}": [...]}}'
            yield reject(record_source(self.path, record), expected, record)
            return
        shared = self.shared(
            conversation,
            {
                **identity_of(conversation),
                "session_id": session_id_of(conversation, *self.id_keys),
            },
        )
        for position, message in enumerate(self.messages(conversation)):
            source = message_source(self.path, record, position)
            if isinstance(message, dict):
                fields = {**shared, "turn_seq": position}
                yield self.turn(Message(message, conversation, fields, source))
            else:
                yield reject(source, f"expected {self.message_shape}", message)

    def shared(self, conversation: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        """What every turn of the conversation carries: its identity and session, and what
        the format adds."""
        return fields

    def messages(self, conversation: dict[str, Any]) -> list[Any]:
        return conversation[self.messages_key]  # type: ignore[no-any-return]

    def turn(self, message: Message) -> Draft | Reject:
        """The message as a turn's draft, with its conversation's fields; or a reject."""
        raise NotImplementedError
