"""What the MongoDB store sends to Atlas Search / Atlas Vector Search, built as plain data:
index definitions and aggregation pipelines. Tests compare them to what Atlas documents, since
no search engine runs where CI does.

Vector scores: for cosine similarity Atlas returns ``(1 + cosine) / 2``; :func:`cosine` turns it
back so that reconciliation thresholds mean the same on every backend.
"""

from __future__ import annotations

import re
from typing import Any

from mempipe.adapters.store.mongo.documents import (
    HIT_FIELDS,
    IDENTITY_FIELDS,
    MEMORY_FILTER_FIELDS,
    searched_fields,
)
from mempipe.domain.partition_keys import METADATA_PREFIX
from mempipe.schemas.indexes import Quantization
from mempipe.schemas.search import STM

SIMILARITY = "cosine"
TEXT_INDEX = "text"
TEXT_ANALYZER = "lucene.english"
"""Stems English words, as the SQLite store's Porter tokenizer does."""
SERVING_PATH = "embedding"
MAX_CANDIDATES = 10_000


def slug(model_id: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", model_id.lower()).strip("_")


def vector_index_name(model_id: str) -> str:
    return f"vector_{slug(model_id)}"


def vector_path(model_id: str, first: bool) -> str:
    """The field a model's vectors live in: ``embedding`` for a collection's first model, one
    field per model after it, so a re-embed writes beside the serving vectors."""
    return SERVING_PATH if first else f"{SERVING_PATH}_{slug(model_id)}"


def filter_paths(collection: str, partition_keys: tuple[str, ...]) -> tuple[str, ...]:
    """Every field a read may filter on: identity, (memories) visibility, status and custom type,
    then each declared metadata partition key by its qualified path."""
    base = IDENTITY_FIELDS if collection == STM else (*MEMORY_FILTER_FIELDS, "status")
    if collection == "custom":
        base = (*base, "type_name")
    return (*base, *(f"{METADATA_PREFIX}{key}" for key in partition_keys))


def vector_index_definition(
    collection: str,
    path: str,
    dimensions: int,
    partition_keys: tuple[str, ...],
    quantization: Quantization = Quantization.NONE,
) -> dict[str, Any]:
    """Atlas Vector Search: ``quantization`` is left out when none (Atlas's default), so an
    index made before quantization was declared is not drift."""
    vector = {"type": "vector", "path": path, "numDimensions": dimensions, "similarity": SIMILARITY}
    if quantization is not Quantization.NONE:
        vector["quantization"] = quantization.value
    return {
        "fields": [
            vector,
            *({"type": "filter", "path": p} for p in filter_paths(collection, partition_keys)),
        ]
    }


def text_index_definition(collection: str, partition_keys: tuple[str, ...]) -> dict[str, Any]:
    """Atlas Search: the text analysed, every filter field as a ``token`` (exact ``equals``)."""
    fields: dict[str, Any] = {
        name: {"type": "string", "analyzer": TEXT_ANALYZER} for name in searched_fields(collection)
    }
    for path in filter_paths(collection, partition_keys):
        node = fields
        *parents, leaf = path.split(".")
        for parent in parents:
            node = node.setdefault(parent, {"type": "document", "fields": {}})["fields"]
        node[leaf] = {"type": "token"}
    return {"mappings": {"dynamic": False, "fields": fields}}


def declared_filters(definition: dict[str, Any]) -> tuple[str, ...]:
    """The filter paths a vector index definition declares."""
    return tuple(f["path"] for f in definition.get("fields", []) if f.get("type") == "filter")


def analysed_fields(definition: dict[str, Any]) -> dict[str, str | None]:
    """The ``string`` (analysed) top-level fields of a search index's static mappings, with
    their analyzers."""
    fields = definition.get("mappings", definition).get("fields", {})
    return {n: f.get("analyzer") for n, f in fields.items() if f.get("type") == "string"}


def token_paths(definition: dict[str, Any], prefix: str = "") -> list[str]:
    """The ``token`` (filterable) paths of a search index's static mappings."""
    paths = []
    for name, field in definition.get("mappings", definition).get("fields", {}).items():
        if field.get("type") == "document":
            paths.extend(token_paths(field, f"{prefix}{name}."))
        elif field.get("type") == "token":
            paths.append(f"{prefix}{name}")
    return paths


def vector_field(definition: dict[str, Any]) -> dict[str, Any]:
    return next((f for f in definition.get("fields", []) if f.get("type") == "vector"), {})


def vector_search_stage(
    index: str,
    path: str,
    vector: list[float],
    k: int,
    query: dict[str, Any],
    *,
    exact: bool = False,
) -> dict[str, Any]:
    """``$vectorSearch`` with the read filter *inside* the stage: the k nearest are the k
    nearest in scope, never the global k narrowed afterwards. ``exact`` runs an exact (ENN)
    search, which Atlas recommends when the filter is selective (one user's records): no
    ``numCandidates`` then. Approximate search keeps ``limit <= numCandidates <= 10,000``."""
    limit = min(k, MAX_CANDIDATES)
    stage: dict[str, Any] = {"index": index, "path": path, "queryVector": list(vector)}
    if exact:
        stage["exact"] = True
    else:
        stage["numCandidates"] = min(max(20 * limit, 100), MAX_CANDIDATES)
    stage["limit"] = limit
    if query:
        stage["filter"] = query
    return {"$vectorSearch": stage}


def text_search_stage(collection: str, text: str, query: dict[str, Any]) -> dict[str, Any]:
    """``$search`` matching the words, the read filter as ``equals`` clauses in ``filter`` (they
    narrow without changing the score)."""
    path = searched_fields(collection)
    compound: dict[str, Any] = {"must": [{"text": {"query": text, "path": path}}]}
    equals = [{"equals": {"path": path, "value": c["$eq"]}} for path, c in query.items()]
    if equals:
        compound["filter"] = equals
    return {"$search": {"index": TEXT_INDEX, "compound": compound}}


def project(score: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"$project": {**HIT_FIELDS, **(extra or {}), "score": {"$meta": score}}}


def vector_search_pipeline(
    index: str, path: str, vector: list[float], k: int, query: dict[str, Any]
) -> list[dict[str, Any]]:
    return [vector_search_stage(index, path, vector, k, query), project("vectorSearchScore")]


def text_search_pipeline(
    collection: str, text: str, k: int, query: dict[str, Any]
) -> list[dict[str, Any]]:
    return [text_search_stage(collection, text, query), {"$limit": k}, project("searchScore")]


def cosine(vector_search_score: float) -> float:
    return 2.0 * vector_search_score - 1.0
