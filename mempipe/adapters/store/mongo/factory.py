"""Build a :class:`MongoStore` from a URL, failing early with a clear message."""

from __future__ import annotations

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from mempipe.adapters.store.mongo.client import MongoStore
from mempipe.adapters.store.mongo.configuration import config_from_url
from mempipe.adapters.store.mongo.exceptions import translate

"""How long a command waits for an unreachable server (``MEMPIPE_MONGODB_TIMEOUT_SECONDS``)."""


def open_mongo_store(url: str, client: MongoClient | None = None) -> MongoStore:
    """``client`` replaces the one built from the URL (a test double, or a client the caller
    already holds)."""
    config = config_from_url(url)
    if client is None:
        try:
            client = MongoClient(
                url,
                tz_aware=True,
                serverSelectionTimeoutMS=int(1000 * _timeout_s()),
                appname="mempipe",
            )
        except PyMongoError as exc:
            raise translate(exc, config.display_url) from exc
    return MongoStore(config, client)


def _timeout_s() -> float:
    from mempipe.settings import MongoEnvironment

    return MongoEnvironment().timeout_seconds
