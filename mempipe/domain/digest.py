"""Content digests that do not depend on order or on the backend: each record's canonical JSON
(sorted keys, times in UTC to the millisecond, which is what MongoDB keeps) is hashed, and the
hashes are summed modulo 2**256, so two stores holding the same records agree whatever order
they read them in."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import get_args

import orjson
from pydantic import BaseModel

MODULUS = 2**256


def canonical(record: BaseModel, leave_out: Iterable[str] = ()) -> bytes:
    """The record as JSON (pydantic's own serializer), its times as UTC ISO text to the
    millisecond, keys sorted."""
    left = set(leave_out)
    data = record.model_dump(mode="json", exclude=left)
    for name in _times(type(record)):
        if name not in left:
            data[name] = millis(getattr(record, name))
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


@functools.cache
def _times(model: type[BaseModel]) -> tuple[str, ...]:
    """A model's datetime fields (every model digested keeps its times at the top level)."""
    return tuple(
        name
        for name, field in model.model_fields.items()
        if datetime in (field.annotation, *get_args(field.annotation))
    )


def millis(value: datetime | None) -> str | None:
    if value is None:
        return None
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return value.isoformat(timespec="milliseconds")


class Digest:
    """A running, order-independent digest of records."""

    def __init__(self) -> None:
        self.count = 0
        self._sum = 0

    def add(self, record: BaseModel, leave_out: Iterable[str] = ()) -> None:
        self.count += 1
        self._sum = (self._sum + _hash(canonical(record, leave_out))) % MODULUS

    def hexdigest(self) -> str:
        return f"{self._sum:064x}"


def _hash(data: bytes) -> int:
    return int.from_bytes(hashlib.sha256(data).digest(), "big")
