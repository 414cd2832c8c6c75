"""``build_context``: one block of memory for a prompt, within a token budget.

Retrieve from each source, rank the hits together, drop near-duplicates, then take whole chunks
greedily into what is left of ``max_tokens`` after a 500-token formatting reserve (so a budget
at or below 500 leaves no room for memories, and a larger one can still come back empty when
no chunk fits). Tokens are estimated at four characters each: the budget is a guard, not a
tokenizer's exact count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from mempipe.adapters.embedding import Embedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.search import Hit, ReadFilter, SearchMode
from mempipe.services.search import SearchError, search

RESERVE_TOKENS = 500
NEAR_DUPLICATE = 0.9
DEFAULT_SOURCES = ("episodic", "semantic")


class ContextResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context: str
    selected: list[Hit] = Field(default_factory=list)
    token_count: int = Field(description="of the formatted context only, reserve excluded")
    max_tokens: int | None = None


def count_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def near_duplicate(a: str, b: str) -> bool:
    left, right = _words(a), _words(b)
    if not left or not right:
        return a.strip() == b.strip()
    return len(left & right) / len(left | right) >= NEAR_DUPLICATE


def build_context(
    uow: UnitOfWork,
    embedder_for: Callable[[str], Embedder],
    query: str,
    sources: Sequence[str] = DEFAULT_SOURCES,
    max_tokens: int | None = None,
    *,
    mode: SearchMode = SearchMode.HYBRID,
    filters: ReadFilter | None = None,
    top_k: int = 10,
) -> ContextResult:
    if max_tokens is not None and max_tokens <= 0:
        raise SearchError("max_tokens must be positive")
    scope = filters or ReadFilter()
    ranked = sorted(
        (
            hit
            for source in sources
            for hit in search(uow, embedder_for, query, source, mode, scope, top_k).hits
        ),
        key=lambda hit: -hit.score,
    )
    budget = math.inf if max_tokens is None else max(0, max_tokens - RESERVE_TOKENS)
    selected: list[Hit] = []
    used = 0
    for hit in ranked:
        if any(near_duplicate(hit.text, kept.text) for kept in selected):
            continue
        cost = count_tokens(_line(hit))
        if used + cost <= budget:
            selected.append(hit)
            used += cost
    context = "\n".join(_line(hit) for hit in selected)
    return ContextResult(
        context=context, selected=selected, token_count=count_tokens(context), max_tokens=max_tokens
    )


def _line(hit: Hit) -> str:
    return f"- [{hit.source}] {hit.text}"
