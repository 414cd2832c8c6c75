"""Quantized vector indexes (issue 41): the quantization is declared per collection, reported
as drift when the index differs, and changed only by an explicit rebuild; a quantized index
finds candidates by its quantized copy and ranks them by the full vectors it keeps, on both of
the SQLite store's paths (sqlite-vec's KNN and the vectors held for wide searches); Atlas gets
``quantization`` in the vector field of its definition."""

from __future__ import annotations

from contextlib import closing

import numpy as np
import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store import open_store
from mempipe.adapters.store.factory import finish_opening
from mempipe.adapters.store.mongo.factory import open_mongo_store
from mempipe.adapters.store.sqlite import memory_sql
from mempipe.bootstrap import prepare_store
from mempipe.errors import ConfigError
from mempipe.schemas.config import MemoryConfig, ProjectConfig, VectorIndexConfig
from mempipe.schemas.indexes import IndexState, Quantization
from mempipe.schemas.search import Near, ReadFilter
from tests.fakes import atlas
from tests.helpers import semantic_memory

EMBEDDER = HashingEmbedder(32)
MODEL = EMBEDDER.model_id
TABLE = memory_sql.vector_table("semantic", MODEL)
VECTORS = np.random.default_rng(5).normal(size=(400, EMBEDDER.dimensions)).astype(np.float32)
QUERIES = VECTORS[:40] + np.random.default_rng(6).normal(size=(40, 32)).astype(np.float32)
QUANTIZED = [Quantization.SCALAR, Quantization.BINARY]


@pytest.fixture(autouse=True)
def held_from_the_second_wide_search(monkeypatch):
    """A wide search after the first is answered from the vectors held in memory."""
    from mempipe.adapters.store.sqlite import vector_scan

    monkeypatch.setattr(vector_scan, "READ_SECONDS_PER_ROW", 1e-12)


def loaded(store, count: int = len(VECTORS)) -> None:
    store.ensure_vector_table("semantic", MODEL, EMBEDDER.dimensions)
    with store.write_transaction():
        for n in range(count):
            memory = semantic_memory(
                f"m{n}", f"note {n}", f"u{n % 4}", has_embedding=True, embedding_model_id=MODEL
            )
            store.add_memory("semantic", memory, VECTORS[n].tolist())


def vector_status(store):
    return next(s for s in store.index_status() if s.kind == "vector")


def nearest(store, query: np.ndarray, user: str | None = None, k: int = 10) -> list[tuple]:
    hits = store.search_vector(
        "semantic", Near(vector=query.tolist(), model_id=MODEL), ReadFilter(user_id=user), k
    )
    return [(hit.id, hit.score) for hit in hits]


def exact(query: np.ndarray, user: str | None = None, k: int = 10) -> list[str]:
    unit = VECTORS / np.linalg.norm(VECTORS, axis=1, keepdims=True)
    scores = unit @ (query / np.linalg.norm(query))
    rows = [n for n in range(len(VECTORS)) if user is None or f"u{n % 4}" == user]
    return [f"m{n}" for n in sorted(rows, key=lambda n: -scores[n])[:k]]


def cosine(memory_id: str, query: np.ndarray) -> float:
    vector = VECTORS[int(memory_id[1:])]
    return float(vector @ query / np.linalg.norm(vector) / np.linalg.norm(query))


@pytest.mark.parametrize("quantization", QUANTIZED)
def test_a_declared_quantization_is_drift_until_an_explicit_rebuild(store, quantization) -> None:
    loaded(store)
    kept = store._rows(f"SELECT memory_rowid, embedding FROM {TABLE} ORDER BY memory_rowid")
    assert vector_status(store).state is IndexState.OK

    store.declare_quantization({"semantic": quantization})
    drift = vector_status(store)
    assert drift.differences == [f"quantization none, declared {quantization}"]
    assert nearest(store, QUERIES[0], "u0"), "a drifted index is searched as it is"
    store.rebuild_indexes(force=False)
    assert vector_status(store).state is IndexState.DRIFT, "nothing rebuilt silently"

    rebuilt = store.rebuild_indexes(force=True)
    assert [s.state for s in rebuilt if s.kind == "vector"] == [IndexState.REBUILT]
    assert vector_status(store).state is IndexState.OK
    ddl = store._rows("SELECT sql FROM sqlite_master WHERE name = ?", (TABLE,))[0][0]
    assert memory_sql.parse_vector_ddl(ddl).quantization is quantization
    after = store._rows(f"SELECT memory_rowid, embedding FROM {TABLE} ORDER BY memory_rowid")
    assert after == kept, "the full vectors are kept as they were"
    size = 32 if quantization is Quantization.SCALAR else 32 // 8
    widths = store._rows(f"SELECT DISTINCT length({memory_sql.QUANTIZED}) FROM {TABLE}")
    assert widths == [(size,)]

    store.declare_quantization({"semantic": Quantization.NONE})
    assert vector_status(store).differences == [f"quantization {quantization}, declared none"]
    store.rebuild_indexes(force=True)
    ddl = store._rows("SELECT sql FROM sqlite_master WHERE name = ?", (TABLE,))[0][0]
    assert memory_sql.QUANTIZED not in ddl, "and back again"


@pytest.mark.parametrize("quantization", QUANTIZED)
def test_a_quantized_index_ranks_its_candidates_by_the_full_vectors(store, quantization) -> None:
    store.declare_quantization({"semantic": quantization})
    loaded(store)
    assert vector_status(store).state is IndexState.OK, "a new index is made as declared"
    found = {"sqlite-vec": 0, "held": 0}
    for query in QUERIES:
        scoped = nearest(store, query, "u1")
        by_sqlite_vec = nearest(store, query)
        held = nearest(store, query)
        if quantization is Quantization.SCALAR:  # bits tie: each path breaks ties its own way
            assert [m for m, _ in held] == [m for m, _ in by_sqlite_vec], "both paths agree"
        for hits in (scoped, by_sqlite_vec, held):
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
            for memory_id, score in hits:
                assert score == pytest.approx(cosine(memory_id, query), abs=1e-5)
        assert {m for m, _ in scoped} <= {f"m{n}" for n in range(1, 400, 4)}
        found["sqlite-vec"] += len({m for m, _ in by_sqlite_vec} & set(exact(query)))
        found["held"] += len({m for m, _ in held} & set(exact(query)))
    recall = {path: count / (10 * len(QUERIES)) for path, count in found.items()}
    assert min(recall.values()) >= (0.99 if quantization is Quantization.SCALAR else 0.8), recall


def test_binary_quantization_needs_whole_bytes(store) -> None:
    store.declare_quantization({"semantic": Quantization.BINARY})
    with pytest.raises(ConfigError, match="divisible by 8, not 12"):
        store.ensure_vector_table("semantic", "hashing-12", 12)


def test_the_project_configuration_declares_each_collection(store_url) -> None:
    config = ProjectConfig(
        memory=MemoryConfig(
            vector_index=VectorIndexConfig(
                quantization=Quantization.SCALAR, collections={"stm": Quantization.BINARY}
            )
        )
    )
    prepare_store(store_url, config, create=True)
    with closing(open_store(store_url)) as store:
        assert store.quantization["stm"] is Quantization.BINARY
        assert store.quantization["semantic"] is Quantization.SCALAR
    prepare_store(store_url, ProjectConfig(), create=True)
    with closing(open_store(store_url)) as store:
        assert set(store.quantization.values()) == {Quantization.NONE}, "changeable"
    with pytest.raises(ValueError, match="unknown collections"):
        VectorIndexConfig(collections={"turns": Quantization.BINARY})


@pytest.mark.parametrize("quantization", QUANTIZED)
def test_atlas_gets_the_quantization_in_its_vector_field(quantization) -> None:
    store = finish_opening(open_mongo_store("mongodb://mongomock/unit", client=atlas.client()))
    try:
        store.ensure_vector_table("semantic", MODEL, EMBEDDER.dimensions)
        vector = store.db["semantic"].list_search_indexes()
        field = next(f for i in vector for f in i["latestDefinition"].get("fields", []))
        assert "quantization" not in field, "none is Atlas's default, left out"

        store.declare_quantization({"semantic": quantization})
        assert vector_status(store).differences == [f"quantization none, declared {quantization}"]
        store.rebuild_indexes(force=False)
        assert vector_status(store).state is IndexState.DRIFT
        store.rebuild_indexes(force=True)
        assert vector_status(store).state is IndexState.OK
        defined = next(
            i["latestDefinition"]
            for i in store.db["semantic"].list_search_indexes()
            if i["type"] == "vectorSearch"
        )
        assert defined["fields"][0]["quantization"] == quantization.value
    finally:
        store.close()
