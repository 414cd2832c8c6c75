"""Vectors are stored per user (migration 0012): a store whose vector tables predate it is
rebuilt on migration with every vector kept, and finds exactly what it found before; a table in
the old layout is reported as drift by ``rebuild-indexes`` and rebuilt with ``--force``."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store import open_store
from mempipe.adapters.store.sqlite import memory_sql
from mempipe.migrations import migrate
from mempipe.schemas.indexes import IndexState
from mempipe.schemas.search import Near, ReadFilter
from tests.helpers import semantic_memory

EMBEDDER = HashingEmbedder(32)
NOW = datetime(2024, 1, 1, tzinfo=UTC)
MODEL = EMBEDDER.model_id
TABLE = memory_sql.vector_table("semantic", MODEL)
WORDS = ["refund", "airport", "seat", "visa", "hotel", "train", "luggage", "passport"]
VECTORS = np.random.default_rng(3).normal(size=(320, EMBEDDER.dimensions)).tolist()
"""Random directions, so that no two distances tie and "the 10 nearest" is one answer."""


@pytest.fixture(autouse=True)
def held_from_the_second_wide_search(monkeypatch):
    """A process's first wide vector search is sqlite-vec's, its next from the vectors then
    held: reading a table is made to cost less than any search (by default it waits until
    sqlite-vec's searches have cost as much as reading the table), so both paths are compared."""
    from mempipe.adapters.store.sqlite import vector_scan

    monkeypatch.setattr(vector_scan, "READ_SECONDS_PER_ROW", 1e-12)


def loaded(store) -> None:
    store.ensure_vector_table("semantic", EMBEDDER.model_id, EMBEDDER.dimensions)
    with store.write_transaction():
        for n in range(300):
            text = f"{WORDS[n % 8]} {WORDS[n * 7 % 8]} note {n}"
            memory = semantic_memory(
                f"m{n}", text, f"u{n % 5}", has_embedding=True, embedding_model_id=MODEL
            )
            store.add_memory("semantic", memory, VECTORS[n])


def old_layout(store) -> None:
    """The vector table as stores before migration 0012 have it: no partition key."""
    conn = store._conn
    ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (TABLE,)).fetchall()[0][0]
    old = ddl.replace(" partition key", "").replace(f", chunk_size={memory_sql.CHUNK_SIZE}", "")
    with conn:
        conn.execute(f"CREATE TEMP TABLE keep AS SELECT * FROM {TABLE}")
        conn.execute(f"DROP TABLE {TABLE}")
        conn.execute(old)
        conn.execute(f"INSERT INTO {TABLE} SELECT * FROM keep")
        conn.execute("DROP TABLE keep")


def results(store) -> list[list[tuple[str, float]]]:
    """Within a user and across the org."""
    found = []
    for n in range(8):
        near = Near(vector=VECTORS[300 + n], model_id=EMBEDDER.model_id)
        for filters in (ReadFilter(user_id=f"u{n % 5}"), ReadFilter(org_id="o")):
            hits = store.search_vector("semantic", near, filters, 10)
            found.append([(h.id, h.score) for h in hits])
    return found


def same_as(before: list[list[tuple[str, float]]]) -> list[list[tuple[str, object]]]:
    """The same ids in the same order, scores equal to 1e-6: across the org a process's later
    searches come from the vectors it holds in memory, whose float32 sums may differ from
    sqlite-vec's in the last bits."""
    return [[(i, pytest.approx(score, abs=1e-6)) for i, score in hits] for hits in before]


def layout(store) -> str:
    return store._rows("SELECT sql FROM sqlite_master WHERE name = ?", (TABLE,))[0][0]


def test_migration_rebuilds_old_vector_tables_per_user_and_finds_the_same(store_url) -> None:
    store = open_store(store_url, migrate=True)
    loaded(store)
    old_layout(store)
    before = results(store)
    store._conn.execute("DELETE FROM _migrations WHERE id LIKE '0012%'")
    assert memory_sql.vector_partition_key(layout(store)) is None

    migrate(store)

    assert memory_sql.vector_partition_key(layout(store)) == "user_id"
    assert store.vector_counts("semantic", EMBEDDER.model_id) == (300, 300)
    assert results(store) == same_as(before)
    assert all(len(r) == 10 for r in before)
    store.close()


def test_an_old_layout_is_drift_until_rebuilt_with_force(store) -> None:
    loaded(store)
    old_layout(store)
    before = results(store)

    (status,) = [s for s in store.index_status() if s.kind == "vector"]
    assert status.state is IndexState.DRIFT
    assert "partitioned by nothing, declared user_id" in status.differences
    store.rebuild_indexes(force=True)

    (status,) = [s for s in store.index_status() if s.kind == "vector"]
    assert status.state is IndexState.OK
    assert results(store) == same_as(before)


def partition_lookup_plan(store) -> str:
    """How SQLite runs the lookup sqlite-vec makes for a partition's chunks (prepared afresh:
    a cached EXPLAIN keeps the plan of the schema it was prepared on)."""
    plan = store._conn.execute(
        f"EXPLAIN QUERY PLAN SELECT chunk_id, validity, rowids FROM {TABLE}_chunks "
        "WHERE partition00 = ?",
        ("u1",),
        can_cache=False,
    ).fetchall()
    return " ".join(row[-1] for row in plan)


def test_a_users_chunks_are_found_through_an_index_in_new_and_migrated_stores(
    store_url,
) -> None:
    store = open_store(store_url, migrate=True)
    loaded(store)
    before = results(store)
    assert "USING INDEX" in partition_lookup_plan(store)

    store._conn.execute(f"DROP INDEX {TABLE}_by_partition")
    store._conn.execute("DELETE FROM _migrations WHERE id LIKE '0014%'")
    assert "SCAN" in partition_lookup_plan(store)
    migrate(store)

    assert "USING INDEX" in partition_lookup_plan(store)
    assert results(store) == same_as(before)
    store.close()


def test_a_dropped_chunk_index_is_reported_and_recreated_without_force(store) -> None:
    loaded(store)
    before = results(store)
    store._conn.execute(f"DROP INDEX {TABLE}_by_partition")

    (status,) = [s for s in store.index_status() if s.kind == "vector"]
    assert status.state is IndexState.DRIFT
    assert status.differences == ["index on the chunks' partition key missing"]
    (repaired,) = [s for s in store.rebuild_indexes(force=False) if s.kind == "vector"]

    assert repaired.state is IndexState.CREATED
    assert "USING INDEX" in partition_lookup_plan(store)
    (status,) = [s for s in store.index_status() if s.kind == "vector"]
    assert status.state is IndexState.OK
    assert results(store) == same_as(before)
