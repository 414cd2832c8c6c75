"""Translate apsw's errors into mempipe's transient / terminal errors."""

from __future__ import annotations

import apsw

from mempipe.errors import (
    MempipeError,
    ResourceError,
    StoreDamagedError,
    StoreError,
    TransientError,
)


class StoreBusyError(TransientError):
    """Another writer held the database for longer than the busy timeout."""


DAMAGE_SIGNS = ("malformed", "vectors blob", "corrupt")
"""How SQLite and sqlite-vec say a page of the file does not hold what it should."""


def translate(exc: apsw.Error, where: str) -> MempipeError:
    if isinstance(exc, apsw.CorruptError) or any(s in str(exc) for s in DAMAGE_SIGNS):
        return StoreDamagedError(where, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreBusyError(f"{where}: database is busy: {exc}")
    if isinstance(exc, apsw.FullError):
        return ResourceError(f"{where}: the disk is full: {exc} (retry once there is space)")
    if isinstance(exc, apsw.IOError):
        return ResourceError(f"{where}: I/O error on the store's disk: {exc}")
    if isinstance(exc, apsw.NotADBError):
        return StoreError(f"{where}: not a SQLite database")
    if isinstance(exc, apsw.CantOpenError):
        return StoreError(
            f"{where}: cannot open the database file (is its directory there and writable?)"
        )
    if isinstance(exc, apsw.ReadOnlyError):
        return StoreError(f"{where}: the database is read-only")
    return StoreError(f"{where}: {type(exc).__name__}: {exc}")
