"""The canonical turn format: one JSON object per turn (JSON Lines, or a JSON array).

``turn_seq`` may be omitted: turns are then numbered per session in the order the file gives
them, counting rejected records too, so that a repaired record later takes its own place.
``speaker`` is taken as the speaker's ``name``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mempipe.archives.drafts import Draft, reject
from mempipe.archives.formats import JsonFormat
from mempipe.archives.formats.conversation import record_source
from mempipe.archives.json_records import JsonRecord
from mempipe.schemas.archive import ArchiveFormat, FormatKind
from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import TURN_FIELDS

_KNOWN = frozenset(TURN_FIELDS)


class CanonicalTurns(JsonFormat):
    format = ArchiveFormat.TURNS
    kind = FormatKind.TURNS

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool:
        return "role" in record and ("content" in record or "session_id" in record)

    def __init__(self, path: str) -> None:
        self.path = path
        self._next_seq: dict[tuple[object, object, object], int] = {}

    def __call__(self, record: JsonRecord) -> Iterator[Draft | Reject]:
        source = record_source(self.path, record)
        value = record.value
        if not isinstance(value, dict):
            yield reject(source, "expected a JSON object holding one turn", record)
            return
        fields = dict(value)
        if "speaker" in fields:
            if fields.get("name") not in (None, fields["speaker"]):
                yield reject(source, "both name and speaker, and they differ", record)
                return
            fields["name"] = fields.pop("speaker")
        if fields.get("turn_seq") is None:
            key = (fields.get("org_id"), fields.get("project_id"), fields.get("session_id"))
            fields["turn_seq"] = self._next_seq.get(key, 0)
            self._next_seq[key] = fields["turn_seq"] + 1
        unknown = fields.keys() - _KNOWN
        if unknown:
            yield reject(source, f"unknown field(s): {', '.join(sorted(unknown))}", record)
            return
        yield Draft(fields, source, record)
