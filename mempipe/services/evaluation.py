"""Retrieval evaluation: recall@k and MRR over labelled queries."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mempipe.adapters.embedding import Embedder, Vector
from mempipe.errors import ConfigError
from mempipe.schemas.errors import describe
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.search import Searchable, search


class EvalQuery(BaseModel):
    """One line of a queries file: the query, the ids that should come back (memory ids, or a
    turn's source message id), and optional identity filters."""

    model_config = ConfigDict(extra="forbid")

    query: str
    relevant_ids: list[str] = Field(min_length=1)
    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    visibility: str | None = None


class EvalResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    mode: SearchMode
    k: int
    queries: int
    recall: float
    mrr: float
    model_id: str | None = None


def read_queries(path: Path) -> list[EvalQuery]:
    queries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            queries.append(EvalQuery.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as exc:
            reason = describe(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ConfigError(f"{path}:{number}: {reason}") from exc
    if not queries:
        raise ConfigError(f"{path}: no queries")
    return queries


def evaluate(
    store: Searchable,
    embedder_for: Callable[[str], Embedder],
    queries: Iterable[EvalQuery],
    source: str,
    mode: SearchMode,
    k: int,
    model_id: str | None = None,
) -> EvalResult:
    items = list(queries)
    if mode is not SearchMode.TEXT:
        embedder_for = prefetching(embedder_for, [item.query for item in items])
    recalls, reciprocal_ranks = [], []
    for item in items:
        filters = ReadFilter(**item.model_dump(exclude={"query", "relevant_ids"}))
        hits = search(store, embedder_for, item.query, source, mode, filters, k, model_id).hits
        found = [h.message_id if h.message_id in item.relevant_ids else h.id for h in hits]
        relevant = set(item.relevant_ids)
        recalls.append(len(relevant & set(found)) / len(relevant))
        rank = next((i for i, hit in enumerate(found, start=1) if hit in relevant), None)
        reciprocal_ranks.append(1.0 / rank if rank else 0.0)
    count = len(recalls)
    return EvalResult(
        source=source,
        mode=mode,
        k=k,
        queries=count,
        recall=round(sum(recalls) / count, 6) if count else 0.0,
        mrr=round(sum(reciprocal_ranks) / count, 6) if count else 0.0,
        model_id=model_id,
    )


PREFETCH_BATCH = 256
"""Query texts sent to the embedder per call when an evaluation embeds its queries up front."""


class PrefetchedEmbedder:
    """An embedder whose vectors for the texts it was given were computed up front, in the
    model's own batches (one call per text costs a model far more than one batch); any other
    text is embedded on demand."""

    def __init__(self, inner: Embedder, texts: Sequence[str]) -> None:
        self.model_id, self.dimensions = inner.model_id, inner.dimensions
        self._inner = inner
        self._known: dict[str, Vector | None] = {}
        distinct = list(dict.fromkeys(texts))
        for start in range(0, len(distinct), PREFETCH_BATCH):
            batch = distinct[start : start + PREFETCH_BATCH]
            self._known.update(zip(batch, inner.embed(batch), strict=True))

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._known]
        if missing:
            self._known.update(zip(missing, self._inner.embed(missing), strict=True))
        return [self._known[t] for t in texts]


def prefetching(
    embedder_for: Callable[[str], Embedder], texts: Sequence[str]
) -> Callable[[str], Embedder]:
    """``embedder_for`` whose embedders know ``texts`` already (each model asked for embeds
    them once, in batches, when first asked)."""
    made: dict[str, Embedder] = {}

    def prefetched(model_id: str) -> Embedder:
        if model_id not in made:
            made[model_id] = PrefetchedEmbedder(embedder_for(model_id), texts)
        return made[model_id]

    return prefetched
