"""Where the SQLite store lives and how its connections are set up."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from mempipe.errors import StoreError


class SqliteConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: Path
    busy_timeout_ms: int = Field(default=30_000, description="wait this long for a writer lock")
    readonly: bool = False
    existing: bool = Field(
        default=False, description="open only a mempipe store that exists; change nothing else"
    )

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"


def config_from_url(url: str) -> SqliteConfig:
    """``sqlite:///rel/path.db`` is relative, ``sqlite:////abs/path.db`` absolute; a bare path is
    taken as it is."""
    if "://" not in url:
        return SqliteConfig(path=Path(url))
    parts = urlsplit(url)
    if parts.netloc:
        raise StoreError(f"{url!r}: a SQLite URL has no host; write sqlite:///path/to/file.db")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path:
        raise StoreError(f"{url!r}: no database file named; write sqlite:///path/to/file.db")
    return SqliteConfig(path=Path(path))
