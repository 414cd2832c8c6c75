"""Extractors by name: the built-ins below, and any that an installed package registers under
the entry-point group ``mempipe.extractors`` (its entry point's name is the extractor's name;
the object it names is called with the LLM settings and returns an :class:`Extractor`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator

from mempipe.adapters.llm.base import Extractor
from mempipe.errors import ConfigError
from mempipe.plugins import installed
from mempipe.schemas.choices import OneOf
from mempipe.schemas.replay import LLMSettings

ENTRY_POINT_GROUP = "mempipe.extractors"
ExtractorFactory = Callable[[LLMSettings], Extractor]


def _offline(llm: LLMSettings) -> Extractor:
    """Rule-based, no network."""
    from mempipe.adapters.llm.offline import OfflineExtractor

    return OfflineExtractor(llm.offline_rules)


def _openai(llm: LLMSettings) -> Extractor:
    """Any OpenAI-compatible endpoint (``MEMPIPE_LLM_*``)."""
    from mempipe.adapters.llm.openai_compat import OpenAIExtractor

    return OpenAIExtractor(llm)


BUILT_IN: dict[str, ExtractorFactory] = {"offline": _offline, "openai": _openai}


def extractor_names() -> list[str]:
    """Every extractor's name, the plug-ins' read from their entry points without loading
    them (what ``--extractor`` offers)."""
    return [*BUILT_IN, *(p.name for p in installed(ENTRY_POINT_GROUP))]


@functools.cache
def _plugin(name: str) -> ExtractorFactory | None:
    point = next((p for p in installed(ENTRY_POINT_GROUP) if p.name == name), None)
    return None if point is None else point.load()


def require_extractor(name: str) -> ExtractorFactory:
    """The factory of the extractor ``name``: a flow asks before any work starts."""
    factory = BUILT_IN.get(name) or _plugin(name)
    if factory is None:
        raise ConfigError(f"unknown extractor {name!r}; known: {', '.join(extractor_names())}")
    return factory


def _known_extractor(name: str) -> str:
    if name not in extractor_names():
        raise ValueError(f"unknown extractor {name!r}; known: {', '.join(extractor_names())}")
    return name


ExtractorName = Annotated[str, AfterValidator(_known_extractor), OneOf(extractor_names)]
"""An extractor's name, as a parameter: checked, and listed in the parameter's schema."""


def extractor_for(name: str, llm: LLMSettings) -> Extractor:
    extractor = require_extractor(name)(llm)
    if not isinstance(extractor, Extractor):
        raise ConfigError(f"extractor {name!r} ({ENTRY_POINT_GROUP}) did not make an Extractor")
    return extractor
