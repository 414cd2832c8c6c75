"""Every archive format in one place: the JSON formats with their parser and the rule that
recognises one of their records, and the table formats by suffix. The reader, detection and the
CLI's ``--format`` choices read from here, so a new format is its parser module (with its
``format`` name and ``recognises``) and one line below, or, from a package of its own, an entry
point under ``mempipe.archive_formats`` whose name is the format's and whose object is the
parser class (found with :mod:`importlib.metadata`, as pytest finds plug-ins). The names are
known without importing a parser: the CLI lists them on every start."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import AfterValidator

from mempipe.schemas.archive import ArchiveFormat

if TYPE_CHECKING:
    from mempipe.archives.drafts import Draft
    from mempipe.archives.json_records import JsonRecord
    from mempipe.schemas.reject import Reject

ENTRY_POINT_GROUP = "mempipe.archive_formats"


class JsonFormat(Protocol):
    """A JSON archive format: made per file (``Parser(path)``), called per record."""

    format: str

    @staticmethod
    def recognises(record: dict[str, Any]) -> bool: ...

    def __init__(self, path: str) -> None: ...

    def __call__(self, record: JsonRecord) -> Iterator[Draft | Reject]: ...


BUILT_IN: dict[str, str] = {
    ArchiveFormat.CHATGPT: "mempipe.archives.formats.chatgpt:ChatGPTExport",
    ArchiveFormat.CLAUDE: "mempipe.archives.formats.claude:ClaudeExport",
    ArchiveFormat.SHAREGPT: "mempipe.archives.formats.sharegpt:ShareGPT",
    ArchiveFormat.OPENAI: "mempipe.archives.formats.openai:OpenAIChat",
}
"""Each format's parser class, as an entry point names one, imported when first needed. Tried
in this order, most specific first: a record could match a looser rule further down (a ChatGPT
conversation also has a list of messages in some exports)."""
CATCH_ALL = (ArchiveFormat.TURNS, "mempipe.archives.formats.turns:CanonicalTurns")
"""mempipe's own turns, the loosest rule: tried last, after any plug-in's."""
TABLE_FORMATS: dict[str, str] = {
    ".parquet": ArchiveFormat.PARQUET,
    ".csv": ArchiveFormat.CSV,
    ".tsv": ArchiveFormat.CSV,
}


def _load(target: str) -> type[JsonFormat]:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def _plugin_names() -> list[str]:
    return [point.name for point in entry_points(group=ENTRY_POINT_GROUP)]


@functools.cache
def json_formats() -> tuple[type[JsonFormat], ...]:
    """Every JSON format in the order detection tries them: the built-ins, the plug-ins', then
    the catch-all."""
    plugins = tuple(point.load() for point in entry_points(group=ENTRY_POINT_GROUP))
    return (*map(_load, BUILT_IN.values()), *plugins, _load(CATCH_ALL[1]))


def format_names() -> list[str]:
    """What ``--format`` takes: ``auto``, every JSON format, the table formats."""
    names = [ArchiveFormat.AUTO, *BUILT_IN, *_plugin_names(), CATCH_ALL[0], *TABLE_FORMATS.values()]
    return list(dict.fromkeys(map(str, names)))


def require_format(name: str) -> str:
    """The name, when a registered format has it; otherwise an error naming them all (a
    ``ValueError``: as a flow parameter's validator, Prefect refuses the run before it starts)."""
    if name not in format_names():
        raise ValueError(f"unknown archive format {name!r}; known: {', '.join(format_names())}")
    return name


FormatName = Annotated[str, AfterValidator(require_format)]
"""An archive format's name, checked against the registry where it is given."""


def json_parser(name: str) -> type[JsonFormat]:
    return next(p for p in json_formats() if p.format == name)


def classify(record: Any) -> str | None:
    """The format a JSON record belongs to, from the keys each format is known by."""
    if not isinstance(record, dict):
        return None
    return next((p.format for p in json_formats() if p.recognises(record)), None)
