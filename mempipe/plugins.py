"""What installed packages add to mempipe's registries (formats, extractors, embedding
providers, store backends), read once per process as the installed packages are: reading every
distribution's entry points costs milliseconds a time, and detection asks for every file."""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points


@functools.cache
def installed(group: str) -> tuple[EntryPoint, ...]:
    """The entry points registered under ``group`` by the installed packages."""
    return tuple(entry_points(group=group))
