"""Build the configured extractor."""

from __future__ import annotations

from mempipe.adapters.llm.base import Extractor
from mempipe.schemas.replay import ExtractorName, LLMSettings


def extractor_for(name: ExtractorName, llm: LLMSettings) -> Extractor:
    if name is ExtractorName.OFFLINE:
        from mempipe.adapters.llm.offline import OfflineExtractor

        return OfflineExtractor()
    from mempipe.adapters.llm.openai_compat import OpenAIExtractor

    return OpenAIExtractor(llm)
