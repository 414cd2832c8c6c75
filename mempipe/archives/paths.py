"""Turn the paths a user gives (files, directories, globs) into the archive files to read."""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

from mempipe.errors import ArchiveError

ARCHIVE_SUFFIXES = frozenset({".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet"})
LINE_SUFFIXES = frozenset({".jsonl", ".ndjson"})
"""JSON Lines by name: read line by line, whatever the first lines hold."""
COMPRESSION_SUFFIXES = frozenset({".gz", ".zst", ".zstd"})
GLOB_CHARS = frozenset("*?[")


def logical_suffix(path: Path) -> str:
    """The suffix that names the format, under any compression suffix (``a.jsonl.gz`` → .jsonl)."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def is_archive(path: Path) -> bool:
    return path.is_file() and logical_suffix(path) in ARCHIVE_SUFFIXES


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Files as given, directories searched recursively for archives, globs expanded; sorted
    within each argument and de-duplicated. A path that names nothing is an error."""
    if not paths:
        raise ArchiveError("no archive path given")
    found: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        text = str(given)
        if GLOB_CHARS & set(text):
            matches = [Path(m) for m in sorted(glob.glob(text, recursive=True))]
            files = [m for m in matches if is_archive(m)]
            if not files:
                raise ArchiveError(f"{text}: the pattern matches no archive file")
        else:
            path = Path(text)
            if path.is_dir():
                files = sorted(p for p in path.rglob("*") if is_archive(p))
                if not files:
                    raise ArchiveError(f"{text}: the directory holds no archive file")
            elif path.is_file():
                files = [path]
            elif path.exists():
                raise ArchiveError(
                    f"{text}: not a regular file (a FIFO, socket or device); "
                    "mempipe reads archive files and directories of them"
                )
            else:
                raise ArchiveError(f"{text}: no such file or directory")
        for file in files:
            resolved = file.resolve()
            if resolved not in seen:
                seen.add(resolved)
                found.append(resolved)
    return found
