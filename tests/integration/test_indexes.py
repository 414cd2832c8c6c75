"""DESIGN rules: partition keys and custom types are write-once; adding a partition key does
not silently rebuild an index (drift is reported, a rebuild is explicit); metadata filters use
the qualified path of a declared key, inside the query."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.errors import ConfigError
from mempipe.schemas.config import CustomTypeConfig
from mempipe.schemas.indexes import IndexState
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.search import SearchError, search

EMBEDDER = HashingEmbedder(32)
NOW = datetime(2024, 1, 1, tzinfo=UTC)
TICKET = CustomTypeConfig(name="ticket", tags={"priority": "string"})


def remember(store, memory_id: str, text: str, engagement: str) -> None:
    store.ensure_vector_table("semantic", EMBEDDER.model_id, EMBEDDER.dimensions)
    record = SemanticMemory(
        id=memory_id,
        org_id="o",
        project_id="p",
        user_id="u",
        text=text,
        label=memory_id,
        metadata={"engagement_id": engagement},
        has_embedding=True,
        embedding_model_id=EMBEDDER.model_id,
        created_at=NOW,
        updated_at=NOW,
    )
    with store.write_transaction():
        store.add_memory("semantic", record, EMBEDDER.embed([text])[0])


def find(store, mode, **metadata):
    filters = ReadFilter(metadata=metadata)
    result = search(
        UnitOfWork(store), lambda _: EMBEDDER, "engagement status", "semantic", mode, filters, 10
    )
    return {hit.id for hit in result.hits}


def vector_status(store):
    return next(s for s in store.index_status() if s.kind == "vector")


def test_declarations_are_write_once(store) -> None:
    assert store.declare(["engagement_id"], [TICKET]) == [
        ("partition_key", "engagement_id"),
        ("custom_type", "ticket"),
    ]
    assert store.declare(["engagement_id"], [TICKET]) == [], "declaring again adds nothing"
    with pytest.raises(ConfigError, match="'engagement_id' was declared and cannot be removed"):
        store.declare([], [TICKET])
    changed = CustomTypeConfig(name="ticket", tags={"priority": "int"})
    with pytest.raises(ConfigError, match="'ticket' cannot change; declare a new name"):
        store.declare(["engagement_id"], [changed])
    assert store.declare(["engagement_id", "tier"], [TICKET]) == [("partition_key", "tier")]


def test_a_new_partition_key_drifts_the_index_until_an_explicit_rebuild(store) -> None:
    remember(store, "alpha", "engagement status green", "eng-alpha")
    remember(store, "beta", "engagement status red", "eng-beta")
    assert vector_status(store).state is IndexState.OK

    store.declare(["engagement_id"], [])
    drift = vector_status(store)
    assert drift.state is IndexState.DRIFT
    assert drift.differences == ["filter fields missing: meta_engagement_id"]
    key = {"metadata.engagement_id": "eng-alpha"}
    assert find(store, SearchMode.TEXT, **key) == {"alpha"}, "text search filters at once"
    with pytest.raises(SearchError, match="rebuild-indexes --force"):
        find(store, SearchMode.SEMANTIC, **key)

    reported = store.rebuild_indexes(force=False)
    assert [s.state for s in reported if s.kind == "vector"] == [IndexState.DRIFT]
    assert vector_status(store).state is IndexState.DRIFT, "nothing rebuilt silently"

    rebuilt = store.rebuild_indexes(force=True)
    assert [s.state for s in rebuilt if s.kind == "vector"] == [IndexState.REBUILT]
    assert vector_status(store).state is IndexState.OK
    assert find(store, SearchMode.SEMANTIC, **key) == {"alpha"}
    assert find(store, SearchMode.HYBRID, **key) == {"alpha"}


def test_an_absent_text_index_is_created_and_filled(store) -> None:
    remember(store, "alpha", "engagement status green", "eng-alpha")
    store._conn.execute("DROP TABLE memories_semantic_fts")
    created = [s for s in store.rebuild_indexes(force=False) if s.state is IndexState.CREATED]
    assert [s.name for s in created] == ["memories_semantic_fts"]
    assert find(store, SearchMode.TEXT) == {"alpha"}


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("engagement_id", "filter by the qualified path; accepted: metadata.engagement_id"),
        ("metadata.tier", "'metadata.tier' is not a partition key the store holds"),
    ],
)
def test_metadata_filters_name_declared_keys_by_their_qualified_path(store, path, message) -> None:
    store.declare(["engagement_id"], [])
    remember(store, "alpha", "engagement status green", "eng-alpha")
    with pytest.raises(SearchError, match=message):
        find(store, SearchMode.TEXT, **{path: "x"})


def text_status(store, collection: str):
    return next(s for s in store.index_status() if s.kind == "text" and s.collection == collection)


def old_turns_index(store) -> None:
    """The turns' text index as stores before migration 0015 have it: no stemming, no names."""
    with store._conn:
        store._conn.execute("DROP TABLE turns_fts")
        store._conn.execute(
            "CREATE VIRTUAL TABLE turns_fts USING fts5(content, content='turns', "
            "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
        )
        store._conn.execute("INSERT INTO turns_fts (turns_fts) VALUES ('rebuild')")


def named_turns(store, fixtures, tmp_path, defaults) -> None:
    from mempipe.schemas.archive import ArchiveFormat
    from tests.helpers import ingest

    archive = tmp_path / "named.jsonl"
    archive.write_text(
        '{"session_id": "s", "role": "user", "name": "Caroline", "content": "running late"}\n'
    )
    ingest(store, archive, defaults, tmp_path, format=ArchiveFormat.TURNS)


def stm_text(store, query: str) -> list[str | None]:
    return [h.name for h in store.search_text("stm", query, ReadFilter(), 5)]


def test_a_text_index_of_another_definition_is_drift_until_a_forced_rebuild(
    store, fixtures, tmp_path, defaults
) -> None:
    named_turns(store, fixtures, tmp_path, defaults)
    old_turns_index(store)
    assert stm_text(store, "caroline runs") == [], "the old index: no names, no stems"

    drift = text_status(store, "stm")
    assert drift.state is IndexState.DRIFT
    assert "porter" in drift.differences[0]
    store.rebuild_indexes(force=False)
    assert text_status(store, "stm").state is IndexState.DRIFT, "nothing rebuilt silently"

    (rebuilt,) = [s for s in store.rebuild_indexes(force=True) if s.name == "turns_fts"]
    assert rebuilt.state is IndexState.REBUILT
    assert text_status(store, "stm").state is IndexState.OK
    assert stm_text(store, "caroline runs") == ["Caroline"]


def test_migration_0015_stems_and_names_existing_text_indexes(
    store, fixtures, tmp_path, defaults
) -> None:
    from mempipe.migrations import migrate

    named_turns(store, fixtures, tmp_path, defaults)
    remember(store, "m1", "deployments were delayed", "e1")
    old_turns_index(store)
    store._conn.execute("DELETE FROM _migrations WHERE id LIKE '0015%'")

    migrate(store)

    assert {
        s.collection: s.state for s in store.index_status() if s.kind == "text"
    } == dict.fromkeys(
        ("stm", "semantic", "episodic", "procedural", "taxonomic", "custom"), IndexState.OK
    )
    assert stm_text(store, "caroline runs") == ["Caroline"]
    assert [h.id for h in store.search_text("semantic", "delays", ReadFilter(), 5)] == ["m1"]
