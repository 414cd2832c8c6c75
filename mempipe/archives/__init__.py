"""Reading transcript archives: paths, compression, format detection and per-format parsing.

Every reader streams: it holds one record (one line, one array item, one table batch) at a
time, so memory stays bounded whatever the archive's size. The reader (and pyarrow with it) is
imported when first asked for: the CLI reads the format registry to build its options, and a
command that reads no archive should not pay for the table readers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mempipe.archives.paths import expand_paths
    from mempipe.archives.reader import ArchiveReader

__all__ = ["ArchiveReader", "expand_paths"]


def __getattr__(name: str) -> Any:
    if name == "ArchiveReader":
        from mempipe.archives.reader import ArchiveReader

        return ArchiveReader
    if name == "expand_paths":
        from mempipe.archives.paths import expand_paths

        return expand_paths
    raise AttributeError(name)
