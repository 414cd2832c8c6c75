"""A test-only stand-in for what MongoDB Atlas adds to a server: ``mongomock`` plus the
search-index API and the ``$vectorSearch`` / ``$search`` stages.

It runs the exact pipelines the adapter sends, and refuses what Atlas refuses: a filter on a
path the index does not declare as a filter (or token) field, a query vector of the wrong
length, a missing or unqueryable index, a search stage that is not first. Index lifecycle as
Atlas reports it: ``$listSearchIndexes`` entries carry ``latestDefinition`` (last accepted) and
``statusDetail[*].mainIndex`` (what serves, with a failure ``message``) and ``stagedIndex``
(an update still building); an update serves the old definition for ``UPDATE_DELAY_S``; a drop
leaves the index ``DELETING`` for ``DROP_DELAY_S`` (a second drop answers code 20); a duplicate
create answers without a documented code. Search sees a document ``SYNC_DELAY_S`` after its
last write (its ``updated_at``). A new index builds for ``BUILD_DELAY_S`` (``PENDING``,
``BUILDING``, then ``READY``); one named in ``NEVER_QUERYABLE`` never gets there. Sessions
and transactions are in :mod:`tests.fakes.transactions`. Scores follow Atlas:
``(1 + cosine) / 2`` for vectors. It also carries the small shim mongomock needs for the
``sort`` argument pymongo 4.11+ passes to its bulk builder.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import mongomock
from mongomock.collection import BulkOperationBuilder
from pymongo.errors import OperationFailure
from pymongo.operations import SearchIndexModel

NEVER_QUERYABLE: set[str] = set()
"""Names of indexes that stay in ``PENDING`` forever once created (a search node that never
catches up)."""
UPDATE_DELAY_S = 0.0
"""How long (real seconds) an updated definition takes to build; until then the old one serves
(``statusDetail[*].mainIndex``) and the new one is staged (``stagedIndex``), as on Atlas."""
BUILD_DELAY_S = 0.0
"""How long a new index takes to build: ``PENDING``, then ``BUILDING`` (not queryable), then
``READY``."""
SYNC_DELAY_S = 0.0
"""How far search lags writes: ``$vectorSearch`` and ``$search`` see a document only this long
after its ``updated_at`` (mongot replicates from the change stream)."""
DROP_DELAY_S = 0.0
"""How long a dropped index stays listed as ``DELETING`` (a second drop answers code 20)."""
HOST = "fake-search-0"


def _accept_sort(method: Any) -> Any:
    def wrapper(self: Any, *args: Any, sort: Any = None, **kwargs: Any) -> Any:
        if sort is not None:
            raise NotImplementedError("the mongomock shim does not order bulk updates")
        return method(self, *args, **kwargs)

    return wrapper


def _indexes(collection: mongomock.Collection) -> dict[str, dict[str, Any]]:
    store = collection._store
    if not hasattr(store, "search_indexes"):
        store.search_indexes = {}
    indexes: dict[str, dict[str, Any]] = store.search_indexes
    now = time.monotonic()
    for name in [n for n, i in indexes.items() if i.get("gone_at", math.inf) <= now]:
        del indexes[name]
    for index in indexes.values():
        ready_at = index.get("ready_at")
        if ready_at is not None and index["status"] in ("PENDING", "BUILDING"):
            if ready_at <= now:
                index.update(status="READY", queryable=True, ready_at=None)
            elif ready_at - now <= BUILD_DELAY_S / 2:
                index["status"] = "BUILDING"
        staged = index.get("staged")
        if staged is not None and staged["ready_at"] <= now:
            index["serving"] = staged["definition"]
            index["staged"] = None
    return indexes


def _listed(index: dict[str, Any]) -> dict[str, Any]:
    """An index as ``$listSearchIndexes`` shows it: ``latestDefinition`` is the last accepted,
    the serving one is ``statusDetail[*].mainIndex.definition``."""
    main = {
        "status": index["status"],
        "queryable": index["queryable"],
        "definition": index["serving"],
    }
    if index.get("message"):
        main["message"] = index["message"]
    detail: dict[str, Any] = {
        "hostname": HOST,
        "status": index["status"],
        "queryable": index["queryable"],
        "mainIndex": main,
    }
    if index.get("staged") is not None:
        detail["stagedIndex"] = {
            "status": "BUILDING",
            "queryable": False,
            "definition": index["staged"]["definition"],
        }
    return {
        "id": index["id"],
        "name": index["name"],
        "type": index["type"],
        "status": index["status"],
        "queryable": index["queryable"],
        "latestDefinition": index["latestDefinition"],
        "statusDetail": [detail],
    }


QUANTIZATIONS = ("none", "scalar", "binary")
"""Atlas Vector Search's ``quantization`` values ("Index Fields for Vector Search")."""


def _check(definition: dict[str, Any]) -> None:
    for field in definition.get("fields", []):
        if field.get("type") == "vector" and field.get("quantization", "none") not in QUANTIZATIONS:
            raise OperationFailure(
                f"quantization must be one of {QUANTIZATIONS}: {field['quantization']!r}", code=2
            )


def create_search_index(self: mongomock.Collection, model: SearchIndexModel | dict) -> str:
    document = model.document if isinstance(model, SearchIndexModel) else model
    _check(document["definition"])
    name = document.get("name", "default")
    if name in _indexes(self):
        # Atlas's answer to a duplicate name carries no documented code: never rely on one.
        raise OperationFailure(f"Duplicate Index: {name} already exists")
    _indexes(self)[name] = {
        "id": f"{self.name}-{name}",
        "name": name,
        "type": document.get("type", "search"),
        "status": "PENDING" if name in NEVER_QUERYABLE or BUILD_DELAY_S > 0 else "READY",
        "queryable": name not in NEVER_QUERYABLE and BUILD_DELAY_S <= 0,
        "ready_at": None
        if name in NEVER_QUERYABLE or BUILD_DELAY_S <= 0
        else time.monotonic() + BUILD_DELAY_S,
        "latestDefinition": document["definition"],
        "serving": document["definition"],
        "staged": None,
    }
    return name


def list_search_indexes(self: mongomock.Collection, name: str | None = None, **_: Any) -> Any:
    found = [_listed(i) for n, i in _indexes(self).items() if name is None or n == name]
    return iter(found)


def update_search_index(self: mongomock.Collection, name: str, definition: dict) -> None:
    index = _indexes(self).get(name)
    if index is None or index["status"] == "DELETING":
        raise OperationFailure(f"Index {name} not found", code=27)
    _check(definition)
    index["latestDefinition"] = definition
    if UPDATE_DELAY_S <= 0:
        index["serving"] = definition
    else:
        index["staged"] = {"definition": definition, "ready_at": time.monotonic() + UPDATE_DELAY_S}


def drop_search_index(self: mongomock.Collection, name: str, **_: Any) -> None:
    index = _indexes(self).get(name)
    if index is None:
        raise OperationFailure(f"Index {name} not found", code=27)
    if index["status"] == "DELETING":
        raise OperationFailure(f"Index {name} is already being deleted", code=20)
    if DROP_DELAY_S <= 0:
        del _indexes(self)[name]
        return
    index.update(status="DELETING", queryable=False, gone_at=time.monotonic() + DROP_DELAY_S)


def set_index_state(
    collection: mongomock.Collection,
    name: str,
    status: str,
    queryable: bool,
    message: str | None = None,
) -> None:
    """Make an index look like one still building (or failed, with Atlas's reason) to the
    adapter."""
    _indexes(collection)[name].update(status=status, queryable=queryable, message=message)


def _value(document: dict[str, Any], path: str) -> Any:
    node: Any = document
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _filter_paths(query: dict[str, Any]) -> Iterable[str]:
    for key, value in query.items():
        if key in ("$and", "$or", "$nor"):
            for branch in value:
                yield from _filter_paths(branch)
        else:
            yield key


def _usable_index(collection: mongomock.Collection, name: str, kind: str) -> dict[str, Any]:
    index = _indexes(collection).get(name)
    if index is None or index["type"] != kind:
        # Atlas answers an unknown index with no results rather than an error; the adapter
        # must never rely on that, so the fake is stricter.
        raise OperationFailure(f"{kind} index {name!r} not found on {collection.name}", code=8)
    if not index["queryable"]:
        raise OperationFailure(f"index {name!r} is not queryable yet", code=8)
    return index["serving"]


def _vector_search(collection: mongomock.Collection, stage: dict[str, Any]) -> list[dict]:
    exact = stage.get("exact", False)
    for required in (
        "index",
        "path",
        "queryVector",
        "limit",
        *(() if exact else ("numCandidates",)),
    ):
        if required not in stage:
            raise OperationFailure(f"$vectorSearch requires {required!r}", code=9)
    if exact and "numCandidates" in stage:
        raise OperationFailure("numCandidates is not allowed with exact: true", code=9)
    definition = _usable_index(collection, stage["index"], "vectorSearch")
    fields = definition["fields"]
    vector_field = next(f for f in fields if f["type"] == "vector")
    if stage["path"] != vector_field["path"]:
        raise OperationFailure(f"Path {stage['path']!r} is not indexed as a vector", code=8)
    if len(stage["queryVector"]) != vector_field["numDimensions"]:
        raise OperationFailure("queryVector has the wrong number of dimensions", code=8)
    if not exact and not stage["limit"] <= stage["numCandidates"] <= 10_000:
        raise OperationFailure("numCandidates must be >= limit and <= 10000", code=8)
    declared = {f["path"] for f in fields if f["type"] == "filter"}
    query = stage.get("filter", {})
    for path in _filter_paths(query):
        if path not in declared:
            raise OperationFailure(f"Path '{path}' needs to be indexed as filter", code=8)
    query_vector = stage["queryVector"]
    scored = []
    for document in collection.find({**query, stage["path"]: {"$exists": True}}):
        if not _synced(document):
            continue
        vector = document[stage["path"]]
        norm = math.sqrt(sum(a * a for a in vector)) * math.sqrt(sum(b * b for b in query_vector))
        cosine = sum(a * b for a, b in zip(vector, query_vector, strict=True)) / (norm or 1.0)
        scored.append((document, (1.0 + cosine) / 2.0))
    scored.sort(key=lambda pair: -pair[1])
    return [{**d, "__score": s} for d, s in scored[: stage["limit"]]]


def _synced(document: dict[str, Any]) -> bool:
    """Whether the search index has caught up with this document's last write (its
    ``updated_at``, else ``created_at``): search sees writes only ``SYNC_DELAY_S`` later."""
    if SYNC_DELAY_S <= 0:
        return True
    written = document.get("updated_at") or document.get("created_at")
    if not isinstance(written, datetime):
        return True
    if written.tzinfo is None:
        written = written.replace(tzinfo=UTC)
    return datetime.now(UTC) - written >= timedelta(seconds=SYNC_DELAY_S)


def _tokens(mappings: dict[str, Any], prefix: str = "") -> dict[str, str]:
    found = {}
    for name, field in mappings.get("fields", {}).items():
        if field.get("type") == "document":
            found.update(_tokens(field, f"{prefix}{name}."))
        else:
            found[f"{prefix}{name}"] = field.get("type")
    return found


def _search(collection: mongomock.Collection, stage: dict[str, Any]) -> list[dict]:
    definition = _usable_index(collection, stage.get("index", "default"), "search")
    types = _tokens(definition["mappings"])
    compound = stage["compound"]
    (must,) = compound["must"]
    paths = must["text"]["path"]
    paths = [paths] if isinstance(paths, str) else paths
    for path in paths:
        if types.get(path) != "string":
            raise OperationFailure(f"Path '{path}' is not indexed as string", code=8)
    query: dict[str, Any] = {}
    for clause in compound.get("filter", []):
        equals = clause["equals"]
        if types.get(equals["path"]) != "token":
            raise OperationFailure(f"Path '{equals['path']}' needs to be indexed as token", code=8)
        query[equals["path"]] = equals["value"]
    words = set(re.findall(r"\w+", must["text"]["query"].lower()))
    scored = []
    for document in collection.find(query):
        if not _synced(document):
            continue
        text = " ".join(str(_value(document, path) or "") for path in paths)
        found = re.findall(r"\w+", text.lower())
        score = sum(1 for w in found if w in words)
        if score:
            scored.append((document, score / (1.0 + len(found) / 10.0)))
    scored.sort(key=lambda pair: -pair[1])
    return [{**d, "__score": s} for d, s in scored]


FIRST_STAGES = {"$vectorSearch": _vector_search, "$search": _search}


def _run(collection: mongomock.Collection, pipeline: list[dict[str, Any]]) -> list[dict]:
    (name, stage), *_ = pipeline[0].items()
    documents = FIRST_STAGES[name](collection, stage)
    for later in pipeline[1:]:
        (op, argument), *_ = later.items()
        if op in FIRST_STAGES:
            raise OperationFailure(f"{op} is only valid as the first stage", code=40602)
        if op == "$limit":
            documents = documents[:argument]
        elif op == "$project":
            documents = [_project(d, argument) for d in documents]
        else:
            raise NotImplementedError(f"the Atlas fake does not run {op} after a search stage")
    return documents


def _project(document: dict[str, Any], projection: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {"_id": document["_id"], "__score": document["__score"]}
    for field, how in projection.items():
        if isinstance(how, dict) and "$meta" in how:
            kept[field] = document["__score"]
        elif how and field in document:
            kept[field] = document[field]
    return kept


_aggregate = mongomock.Collection.aggregate


def aggregate(self: mongomock.Collection, pipeline: list[dict], session: Any = None, **kw: Any):
    if pipeline and next(iter(pipeline[0])) in FIRST_STAGES:
        for document in (found := _run(self, pipeline)):
            document.pop("__score", None)
        return iter(found)
    for stage in pipeline[1:]:
        if next(iter(stage)) in FIRST_STAGES:
            raise OperationFailure(f"{next(iter(stage))} is only valid as the first stage")
    return _aggregate(self, pipeline, session=session, **kw)


def install() -> None:
    """Patch mongomock (idempotent): the bulk ``sort`` shim and the Atlas search surface."""
    if getattr(mongomock.Collection, "_atlas_fake", False):
        return
    for name in ("add_update", "add_replace", "add_delete"):
        setattr(BulkOperationBuilder, name, _accept_sort(getattr(BulkOperationBuilder, name)))
    mongomock.Collection.create_search_index = create_search_index
    mongomock.Collection.list_search_indexes = list_search_indexes
    mongomock.Collection.update_search_index = update_search_index
    mongomock.Collection.drop_search_index = drop_search_index
    mongomock.Collection.aggregate = aggregate
    mongomock.Collection._atlas_fake = True


STRICT = {"BUILD_DELAY_S": 0.05, "UPDATE_DELAY_S": 0.05, "DROP_DELAY_S": 0.05, "SYNC_DELAY_S": 0.2}
"""Delays for tests that run against the fake as strictly as Atlas behaves (small, so a suite
stays fast; the adapter must wait for each one)."""


@contextmanager
def strict() -> Iterator[None]:
    """Indexes that take time to build, update and drop, and search that lags writes, for the
    duration of the block."""
    saved = {name: globals()[name] for name in STRICT}
    globals().update(STRICT)
    try:
        yield
    finally:
        globals().update(saved)


def client() -> mongomock.MongoClient:
    """A fake Atlas client: a replica set whose sessions run multi-document transactions
    (:mod:`tests.fakes.transactions`), as every deployment mempipe accepts does."""
    install()
    from tests.fakes import transactions as fake_transactions

    fake_transactions.install()
    return fake_transactions.TransactionalClient(tz_aware=True)
