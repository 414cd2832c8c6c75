"""Retrieval evaluation: recall@k and MRR over labelled queries."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mempipe.adapters.embedding import Embedder, Vector, embedder_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.errors import ConfigError, MempipeError
from mempipe.schemas.errors import describe
from mempipe.schemas.evaluation import (
    GROUP_FIELDS,
    EvalQuery,
    EvalResult,
    GroupScores,
    QueryDetail,
    QueryFile,
    Scores,
)
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.search import search

KNOWN_FIELDS = frozenset(EvalQuery.model_fields) - {"group"}


def read_queries(path: Path, *, strict: bool = False, group_by: str | None = None) -> QueryFile:
    """Fields eval does not use are ignored and counted (refused when ``strict``); results are
    grouped by ``group_by``, or by the first of GROUP_FIELDS the file carries."""
    lines: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number}: {exc}") from exc
        if not isinstance(fields, dict):
            raise ConfigError(f"{path}:{number}: a query line is a JSON object")
        lines.append((number, fields))
    if not lines:
        raise ConfigError(f"{path}: no queries")
    if group_by is None:
        group_by = next((f for f in GROUP_FIELDS if any(f in fields for _, fields in lines)), None)
    ignored: Counter[str] = Counter()
    queries = []
    for number, fields in lines:
        unknown = sorted(set(fields) - KNOWN_FIELDS - {group_by})
        if unknown and strict:
            raise ConfigError(f"{path}:{number}: unknown field(s) {', '.join(unknown)} (--strict)")
        ignored.update(unknown)
        known = {name: value for name, value in fields.items() if name in KNOWN_FIELDS}
        group = fields.get(group_by) if group_by else None
        try:
            queries.append(
                EvalQuery.model_validate({**known, "group": None if group is None else str(group)})
            )
        except ValidationError as exc:
            raise ConfigError(f"{path}:{number}: {describe(exc)}") from exc
    return QueryFile(queries=queries, ignored_fields=dict(ignored), group_by=group_by)


@dataclass(frozen=True)
class Evaluation:
    result: EvalResult
    details: list[QueryDetail]


def evaluate(
    uow: UnitOfWork,
    embedder_for: Callable[[str], Embedder],
    queries: QueryFile,
    source: str,
    mode: SearchMode,
    ks: Sequence[int],
    model_id: str | None = None,
) -> Evaluation:
    """Recall at each k (one search per k: a top-k list is what a user asking for k gets) and
    MRR at the largest k. The recall gate of ``reembed`` calls this too, so its verdict is what
    ``mempipe eval`` prints for the same file."""
    uow.schema.require_search("eval")
    items = queries.queries
    if mode is not SearchMode.TEXT:
        embedder_for = prefetching(embedder_for, [item.query for item in items])
    details = [_score(uow, embedder_for, item, source, mode, ks, model_id) for item in items]
    groups = sorted({d.group for d in details if d.group is not None})
    overall = _scores(details, ks)
    return Evaluation(
        result=EvalResult(
            **overall.model_dump(),
            source=source,
            mode=mode,
            k=ks[0],
            model_id=model_id,
            ignored_fields=queries.ignored_fields,
            group_by=queries.group_by,
            groups=[_group_scores(g, details, ks) for g in groups],
            bridged=sum(d.bridge is not None for d in details),
            bridge=next((d.bridge for d in details if d.bridge is not None), None),
        ),
        details=details,
    )


def evaluate_file(
    uow: UnitOfWork,
    queries: str,
    source: str,
    mode: str,
    ks: Sequence[int],
    model_id: str | None,
    group_by: str | None,
    details: str | None,
    strict: bool,
) -> EvalResult:
    """``mempipe eval``: the labelled queries of a JSONL file scored; ``details``: a JSONL file
    of each query's ranks, written beside."""
    labelled = read_queries(Path(queries), strict=strict, group_by=group_by)
    evaluation = evaluate(uow, embedder_for, labelled, source, SearchMode(mode), list(ks), model_id)
    if details is not None:
        with Path(details).open("w", encoding="utf-8") as out:
            out.writelines(d.model_dump_json() + "\n" for d in evaluation.details)
    return evaluation.result


def _score(
    uow: UnitOfWork,
    embedder_for: Callable[[str], Embedder],
    item: EvalQuery,
    source: str,
    mode: SearchMode,
    ks: Sequence[int],
    model_id: str | None,
) -> QueryDetail:
    filters = ReadFilter(**item.model_dump(exclude={"query", "relevant_ids", "group"}))
    relevant = set(item.relevant_ids)
    found: dict[int, list[str]] = {}
    bridge = None
    for k in sorted(set(ks)):
        result = search(uow, embedder_for, item.query, source, mode, filters, k, model_id)
        found[k] = [h.message_id if h.message_id in relevant else h.id for h in result.hits]
        bridge = bridge or result.bridge
    longest = found[max(found)]
    return QueryDetail(
        query=item.query,
        user_id=item.user_id,
        group=item.group,
        ranks={r: longest.index(r) + 1 if r in longest else None for r in item.relevant_ids},
        recall_at={k: len(relevant & set(found[k])) / len(relevant) for k in ks},
        bridge=bridge,
    )


def _group_scores(group: str, details: Sequence[QueryDetail], ks: Sequence[int]) -> GroupScores:
    scores = _scores([d for d in details if d.group == group], ks)
    return GroupScores(group=group, **scores.model_dump())


def _scores(details: Sequence[QueryDetail], ks: Sequence[int]) -> Scores:
    count = len(details)
    recall_at = {k: round(sum(d.recall_at[k] for d in details) / count, 6) for k in ks}
    firsts = [min((r for r in d.ranks.values() if r is not None), default=None) for d in details]
    return Scores(
        queries=count,
        recall=recall_at[ks[0]],
        recall_at=recall_at,
        mrr=round(sum(1.0 / r for r in firsts if r) / count, 6),
    )


PREFETCH_BATCH = 256
"""Query texts sent to the embedder per call when an evaluation embeds its queries up front."""


class PrefetchedEmbedder:
    """An embedder whose query vectors for the texts it was given were computed up front, in
    the model's own batches (one call per text costs a model far more than one batch); any other
    query is embedded on demand, and documents as the model embeds them."""

    def __init__(self, inner: Embedder, texts: Sequence[str]) -> None:
        self.model_id, self.dimensions = inner.model_id, inner.dimensions
        self.symmetric = inner.symmetric
        self._inner = inner
        self._known: dict[str, Vector | None] = {}
        distinct = list(dict.fromkeys(texts))
        for start in range(0, len(distinct), PREFETCH_BATCH):
            batch = distinct[start : start + PREFETCH_BATCH]
            self._known.update(zip(batch, inner.embed_query(batch), strict=True))

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        return self._inner.embed(texts)

    def embed_query(self, texts: Sequence[str]) -> list[Vector | None]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._known]
        if missing:
            self._known.update(zip(missing, self._inner.embed_query(missing), strict=True))
        return [self._known[t] for t in texts]


def prefetching(
    embedder_for: Callable[[str], Embedder], texts: Sequence[str]
) -> Callable[[str], Embedder]:
    """``embedder_for`` whose embedders know ``texts`` already (each model asked for embeds
    them once, in batches, when first asked; a model that failed them fails at once after)."""
    made: dict[str, Embedder | MempipeError] = {}

    def prefetched(model_id: str) -> Embedder:
        if model_id not in made:
            try:
                made[model_id] = PrefetchedEmbedder(embedder_for(model_id), texts)
            except MempipeError as failure:  # asked once: each query meets the same failure
                made[model_id] = failure
        found = made[model_id]
        if isinstance(found, MempipeError):
            raise found
        return found

    return prefetched
