"""Translate pymongo's errors into mempipe's transient / terminal errors."""

from __future__ import annotations

from pymongo import errors

from mempipe.credentials import scrub
from mempipe.errors import MempipeError, StoreError, TransientError


class StoreUnavailableError(TransientError):
    """The server could not be reached or stepped down: the same request may succeed later."""


class SearchUnavailableError(StoreError):
    """The deployment has no search engine (mongot): vector and text search cannot run."""


SEARCH_NOT_ENABLED = 31082
"""The deployment has no search engine (``SearchNotEnabled``)."""
COMMAND_NOT_SUPPORTED = 115
"""``$listSearchIndexes`` on a deployment that has no search configured (before 8.2)."""
UNKNOWN_STAGE = 40324
"""A server too old for ``$vectorSearch`` / ``$search`` (``Unrecognized pipeline stage``)."""
NO_SEARCH_CODES = (SEARCH_NOT_ENABLED, COMMAND_NOT_SUPPORTED, UNKNOWN_STAGE)
NO_SEARCH_HINT = (
    "vector and text search need MongoDB Atlas or self-managed MongoDB 8.2+ with mongot "
    "(or the mongodb/mongodb-atlas-local image)"
)


def translate(exc: errors.PyMongoError, where: str) -> MempipeError:
    """The driver's error as mempipe's, its text without any credential (a driver may quote
    the URL it was given)."""
    error = _translated(exc, where)
    error.args = (scrub(str(error)),)
    return error


def _translated(exc: errors.PyMongoError, where: str) -> MempipeError:
    if isinstance(exc, errors.ConnectionFailure | errors.AutoReconnect):
        reason = str(exc).split(" (configured timeouts")[0].split(", Timeout:")[0]
        return StoreUnavailableError(f"{where}: MongoDB is unreachable: {reason}")
    if isinstance(exc, errors.OperationFailure):
        message = str(exc.details.get("errmsg", exc)) if exc.details else str(exc)
        if exc.has_error_label("TransientTransactionError"):
            return StoreUnavailableError(f"{where}: transient transaction error: {message}")
        if exc.code in (SEARCH_NOT_ENABLED, UNKNOWN_STAGE):
            return SearchUnavailableError(f"{where}: {message}; {NO_SEARCH_HINT}")
        if exc.code in (13, 18):
            return StoreError(
                f"{where}: not authorized: {message} (see docs/stores/mongodb.md, Permissions)"
            )
        return StoreError(f"{where}: {message}")
    if isinstance(exc, errors.ConfigurationError | errors.InvalidURI):
        return StoreError(f"{where}: {exc}")
    return StoreError(f"{where}: {type(exc).__name__}: {exc}")
