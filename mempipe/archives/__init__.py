"""Reading transcript archives: paths, compression, format detection and per-format parsing.

Every reader streams: it holds one record (one line, one array item, one table batch) at a
time, so memory stays bounded whatever the archive's size.
"""

from mempipe.archives.paths import expand_paths
from mempipe.archives.reader import ArchiveReader

__all__ = ["ArchiveReader", "expand_paths"]
