"""Every input format in one registry, whatever it brings in: conversations read as turns
(``backfill --format``: the JSON exports, mempipe's own turns, CSV and Parquet tables), another
system's memories and mempipe's bundles (``import --format``). One protocol, :class:`Format`;
one table of the built-ins below; one entry point group, ``mempipe.formats``, whose entry's name
is the format's and whose object is its class (found with :mod:`importlib.metadata`, as pytest
finds plug-ins; the older group ``mempipe.archive_formats`` still registers transcript
formats). Nothing branches on a format's name: what differs is what the format says of itself
(its kind, the suffixes it claims, whether it is read as a stream). The built-ins' names are
known without importing a parser: the CLI lists them on every start."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol

from pydantic import AfterValidator

from mempipe.plugins import installed
from mempipe.schemas.archive import ArchiveFormat, FormatKind
from mempipe.schemas.choices import OneOf
from mempipe.schemas.memory_import import MemoryFormat

if TYPE_CHECKING:
    from mempipe.archives.drafts import Draft, Skipped
    from mempipe.archives.formats import FileReading
    from mempipe.schemas.reject import Reject

ENTRY_POINT_GROUP = "mempipe.formats"
TRANSCRIPT_GROUP = "mempipe.archive_formats"
"""The first group, of transcript formats only (a plain JSON record parser each)."""


class Format(Protocol):
    """An input format, made per file (``Format(path)``). ``suffixes``: the files it claims by
    their suffix alone (tables); the others are told by their records (``recognises``, tried on
    a file's first records). ``streamed``: read from the opened (decompressed) stream, or, not,
    from the path itself (Parquet)."""

    format: ClassVar[str]
    kind: ClassVar[FormatKind]
    suffixes: ClassVar[tuple[str, ...]]
    streamed: ClassVar[bool]

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool: ...

    def __init__(self, path: str) -> None: ...

    def drafts(self, reading: FileReading) -> Iterator[Draft | Reject | Skipped]: ...


BUILT_IN: dict[str, tuple[FormatKind, str]] = {
    ArchiveFormat.CHATGPT: (FormatKind.TURNS, "mempipe.archives.formats.chatgpt:ChatGPTExport"),
    ArchiveFormat.CLAUDE: (FormatKind.TURNS, "mempipe.archives.formats.claude:ClaudeExport"),
    ArchiveFormat.SHAREGPT: (FormatKind.TURNS, "mempipe.archives.formats.sharegpt:ShareGPT"),
    ArchiveFormat.OPENAI: (FormatKind.TURNS, "mempipe.archives.formats.openai:OpenAIChat"),
    ArchiveFormat.TURNS: (FormatKind.TURNS, "mempipe.archives.formats.turns:CanonicalTurns"),
    ArchiveFormat.CSV: (FormatKind.TURNS, "mempipe.archives.formats.tabular:Csv"),
    ArchiveFormat.PARQUET: (FormatKind.TURNS, "mempipe.archives.formats.tabular:Parquet"),
    "bundle": (FormatKind.BUNDLE, "mempipe.archives.formats.bundle:Bundle"),
    MemoryFormat.MEM0: (FormatKind.MEMORIES, "mempipe.archives.memories:Mem0"),
    MemoryFormat.LANGGRAPH: (FormatKind.MEMORIES, "mempipe.archives.memories:LangGraph"),
    MemoryFormat.MEMORIES: (FormatKind.MEMORIES, "mempipe.archives.memories:Memories"),
    "letta": (FormatKind.MEMORIES, "mempipe.archives.memories.letta:Letta"),
}
"""Each built-in format's kind and class, imported when first needed. Detection tries the
record-told formats in this order, most specific first (a ChatGPT conversation also has a list
of messages in some exports), the plug-ins' after them, and mempipe's own turns, the loosest
rule, last."""
CATCH_ALL = ArchiveFormat.TURNS


@functools.cache
def _load(target: str) -> type[Format]:
    module, name = target.split(":")
    loaded: type[Format] = getattr(importlib.import_module(module), name)
    return loaded


def _transcript_format(parser: type[Any]) -> type[Format]:
    """A class of the first group (``format``, ``recognises``, called per JSON record) as a
    :class:`Format` of turns."""
    from mempipe.archives.formats import JsonFormat

    return type(parser.__name__, (parser, JsonFormat), {"kind": FormatKind.TURNS})


@functools.cache
def _plugins() -> dict[str, type[Format]]:
    found = {p.name: _transcript_format(p.load()) for p in installed(TRANSCRIPT_GROUP)}
    found |= {point.name: point.load() for point in installed(ENTRY_POINT_GROUP)}
    return found


def _plugin_kinds() -> dict[str, FormatKind]:
    """The plug-ins' names and kinds; a transcript group's entry is known without loading it."""
    kinds = {point.name: FormatKind.TURNS for point in installed(TRANSCRIPT_GROUP)}
    if installed(ENTRY_POINT_GROUP):
        kinds |= {name: cls.kind for name, cls in _plugins().items()}
    return kinds


def names(*kinds: FormatKind) -> list[str]:
    """The formats of these kinds, built-ins first."""
    built_in = [name for name, (kind, _) in BUILT_IN.items() if kind in kinds]
    plugins = [name for name, kind in _plugin_kinds().items() if kind in kinds]
    return list(dict.fromkeys(map(str, [*built_in, *plugins])))


def format_class(name: str) -> type[Format]:
    """The format called ``name`` (an error naming them all where none is)."""
    if name in BUILT_IN:
        return _load(BUILT_IN[name][1])
    if name in _plugins():
        return _plugins()[name]
    raise ValueError(f"unknown format {name!r}; known: {', '.join(names(*FormatKind))}")


def kind_of(name: str) -> FormatKind:
    return BUILT_IN[name][0] if name in BUILT_IN else format_class(name).kind


@functools.cache
def detected() -> tuple[type[Format], ...]:
    """The formats of turns told by their records, in the order detection tries them."""
    told = [
        format_class(name)
        for name in names(FormatKind.TURNS)
        if name != CATCH_ALL and not format_class(name).suffixes
    ]
    return (*told, format_class(CATCH_ALL))


@functools.cache
def by_suffix(suffix: str) -> str | None:
    """The format of turns that claims files of this suffix (``.csv``), if one does; asked
    once a suffix, as the installed plug-ins are read once a process."""
    claiming = (format_class(name) for name in names(FormatKind.TURNS))
    return next((fmt.format for fmt in claiming if suffix in fmt.suffixes), None)


def format_names() -> list[str]:
    """What ``backfill --format`` takes: ``auto`` and every format of turns."""
    return [str(ArchiveFormat.AUTO), *names(FormatKind.TURNS)]


def require_format(name: str) -> str:
    """The name, when a format of turns has it; otherwise an error naming them all (a
    ``ValueError``: as a flow parameter's validator, Prefect refuses the run before it starts)."""
    if name not in format_names():
        raise ValueError(f"unknown archive format {name!r}; known: {', '.join(format_names())}")
    return name


def require_memory_format(name: str) -> str:
    """The name, when a format of memories or a bundle has it."""
    known = memory_format_names()
    if name not in known:
        raise ValueError(f"unknown memory format {name!r}; known: {', '.join(known)}")
    return name


def memory_format_names() -> list[str]:
    """What ``import --format`` takes: every format of memories, and the bundle."""
    return names(FormatKind.BUNDLE, FormatKind.MEMORIES)


FormatName = Annotated[str, AfterValidator(require_format), OneOf(format_names)]
"""An archive format's name, checked against the registry where it is given."""
MemoryFormatName = Annotated[str, AfterValidator(require_memory_format), OneOf(memory_format_names)]
"""A memory format's name, checked against the registry where it is given."""


def classify(record: Any) -> str | None:
    """The format of turns a JSON record belongs to, from the keys each format is known by."""
    if not isinstance(record, dict):
        return None
    return next((p.format for p in detected() if p.recognises(record)), None)
