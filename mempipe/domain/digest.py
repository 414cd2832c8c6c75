"""Content digests that do not depend on order or on the backend: each record's canonical JSON
(sorted keys, times in UTC to the millisecond, which is what MongoDB keeps) is hashed, and the
hashes are summed modulo 2**256, so two stores holding the same records agree whatever order
they read them in."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import orjson
from pydantic import BaseModel

MODULUS = 2**256


def canonical(record: BaseModel, leave_out: Iterable[str] = ()) -> bytes:
    data = record.model_dump(mode="python", exclude=set(leave_out))
    return orjson.dumps(_plain(data), option=orjson.OPT_SORT_KEYS)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value.value if isinstance(value, Enum) else value


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
