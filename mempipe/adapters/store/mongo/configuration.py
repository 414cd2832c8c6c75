"""Where the MongoDB store lives: the URL, the database and how long to wait for indexes."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from mempipe.credentials import public_url
from mempipe.errors import StoreError

DEFAULT_DATABASE = "mempipe"
SCHEMES = ("mongodb", "mongodb+srv")


class MongoConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    url: str = Field(description="the connection string, credentials included")
    database: str
    index_timeout_s: float = Field(
        default=600.0, description="how long to wait for a search index to become queryable"
    )
    index_poll_s: float = Field(default=5.0, description="how often to look while waiting")
    exact_scan_limit: int = Field(
        default=20_000,
        description="on a server without vector search, reconciliation compares an owner's "
        "memories of a type by exact scan, up to this many",
    )
    sync_window_s: float = Field(
        default=120.0,
        description="how far behind writes a search index may be: memories written this "
        "recently are compared directly in reconciliation, not only through the index",
    )

    @property
    def display_url(self) -> str:
        """The URL without its password, for logs and reports."""
        return public_url(self.url)


def config_from_url(url: str) -> MongoConfig:
    """``mongodb://host/DB`` or ``mongodb+srv://host/DB``; without a database in the path,
    ``MEMPIPE_MONGODB_DATABASE`` or ``mempipe``. ``MEMPIPE_MONGODB_INDEX_TIMEOUT`` (seconds)
    bounds every wait for a search index; ``MEMPIPE_MONGODB_SYNC_WINDOW`` (seconds) is how far
    the search index may lag writes; ``MEMPIPE_MONGODB_EXACT_SCAN_LIMIT`` how many of an
    owner's memories reconciliation compares by exact scan on a server without vector
    search."""
    parts, shown = urlsplit(url), public_url(url)
    if parts.scheme not in SCHEMES:
        raise StoreError(f"{shown!r}: a MongoDB URL starts with mongodb:// or mongodb+srv://")
    if not parts.netloc:
        raise StoreError(f"{shown!r}: no host; write mongodb://HOST[:PORT]/DATABASE")
    database = unquote(parts.path.lstrip("/")) or os.environ.get(
        "MEMPIPE_MONGODB_DATABASE", DEFAULT_DATABASE
    )
    if re.search(r'[/\\. "$]', database):
        raise StoreError(f"{shown!r}: {database!r} is not a valid MongoDB database name")
    extra: dict[str, float] = {}
    for variable, field in (
        ("MEMPIPE_MONGODB_INDEX_TIMEOUT", "index_timeout_s"),
        ("MEMPIPE_MONGODB_SYNC_WINDOW", "sync_window_s"),
        ("MEMPIPE_MONGODB_INDEX_POLL", "index_poll_s"),
        ("MEMPIPE_MONGODB_EXACT_SCAN_LIMIT", "exact_scan_limit"),
    ):
        value = os.environ.get(variable)
        try:
            if value:
                extra[field] = float(value)
        except ValueError as exc:
            raise StoreError(f"{variable}={value!r} is not a number") from exc
    return MongoConfig(url=url, database=database, **extra)
