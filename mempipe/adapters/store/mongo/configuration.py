"""Where the MongoDB store lives: the URL, the database and how long to wait for indexes."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mempipe.credentials import public_url
from mempipe.errors import StoreError
from mempipe.schemas.errors import describe
from mempipe.settings import MongoEnvironment

SCHEMES = ("mongodb", "mongodb+srv")


class MongoConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    url: str = Field(description="the connection string, credentials included")
    database: str
    index_timeout_s: float = Field(description="how long to wait for a search index")
    index_poll_s: float = Field(description="how often to look while waiting")
    exact_scan_limit: int = Field(
        description="on a server without vector search, reconciliation compares an owner's "
        "memories of a type by exact scan, up to this many"
    )
    sync_window_s: float = Field(
        description="how far behind writes a search index may be: memories written this "
        "recently are compared directly in reconciliation, not only through the index"
    )

    @property
    def display_url(self) -> str:
        """The URL without its password, for logs and reports."""
        return public_url(self.url)


def config_from_url(url: str) -> MongoConfig:
    """``mongodb://host/DB`` or ``mongodb+srv://host/DB``; without a database in the path,
    ``MEMPIPE_MONGODB_DATABASE``; the waits and limits from ``MEMPIPE_MONGODB_*``
    (:class:`mempipe.settings.MongoEnvironment`)."""
    parts, shown = urlsplit(url), public_url(url)
    if parts.scheme not in SCHEMES:
        raise StoreError(f"{shown!r}: a MongoDB URL starts with mongodb:// or mongodb+srv://")
    if not parts.netloc:
        raise StoreError(f"{shown!r}: no host; write mongodb://HOST[:PORT]/DATABASE")
    try:
        env = MongoEnvironment()
    except ValidationError as exc:
        raise StoreError(f"MEMPIPE_MONGODB_*: {describe(exc, with_input=True)}") from exc
    database = unquote(parts.path.lstrip("/")) or env.database
    if re.search(r'[/\\. "$]', database):
        raise StoreError(f"{shown!r}: {database!r} is not a valid MongoDB database name")
    return MongoConfig(
        url=url,
        database=database,
        index_timeout_s=env.index_timeout,
        sync_window_s=env.sync_window,
        index_poll_s=env.index_poll,
        exact_scan_limit=env.exact_scan_limit,
    )
