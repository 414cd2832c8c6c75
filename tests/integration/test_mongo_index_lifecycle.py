"""The search-index lifecycle as Atlas reports it, on the stricter fake: drops pass through
``DELETING``, an update keeps the old definition serving until the new one is built, build
failures are reported per search host in ``statusDetail``, and a duplicate create carries no
documented error code. (Atlas documentation: "Manage Atlas Search / Vector Search indexes",
``$listSearchIndexes`` output.)"""

from __future__ import annotations

import time

import pytest

from mempipe.adapters.store.mongo.search_indexes import IndexNotQueryableError
from mempipe.errors import StoreError
from mempipe.schemas.search import CandidateQuery, Near, ReadFilter
from tests.fakes import atlas

MODEL = "hashing-4"


def near(vector: list[float]) -> Near:
    return Near(vector=vector, model_id=MODEL)


@pytest.fixture
def slow_drops(monkeypatch) -> float:
    monkeypatch.setattr(atlas, "DROP_DELAY_S", 0.6)
    return 0.6


def test_an_index_still_being_dropped_is_waited_out_then_created_again(mongo, slow_drops) -> None:
    """A re-embed back to a model whose index was just dropped (a rollback, then the same move
    again) must create the index anew, not take the DELETING one for it and time out."""
    semantic = mongo.db["semantic"]
    definition = mongo.search_indexes.definition(semantic, "text")
    mongo.search_indexes.drop(semantic, "text")
    assert mongo.search_indexes.get(semantic, "text")["status"] == "DELETING"
    mongo.search_indexes.drop(semantic, "text")  # a second drop: code 20 on Atlas, no error here
    started = time.monotonic()
    assert mongo.search_indexes.ensure(semantic, "text", "search", definition) is True
    assert time.monotonic() - started >= slow_drops * 0.5, "it waited for the drop to finish"
    mongo.search_indexes.wait_queryable(semantic, "text")
    assert mongo.search_indexes.get(semantic, "text")["status"] == "READY"


def test_a_duplicate_create_without_an_error_code_is_someone_elses_index(mongo) -> None:
    turns = mongo.db["turns"]
    definition = mongo.search_indexes.definition(turns, "text")
    assert mongo.search_indexes.create(turns, "text", "search", definition) is False


def test_a_failed_build_names_the_reason_atlas_gives_per_host(mongo) -> None:
    turns = mongo.db["turns"]
    atlas.set_index_state(
        turns, "text", "FAILED", False, message="Field 'metadata.x' has an invalid mapping"
    )
    mongo.search_indexes.timeout_s = 5
    with pytest.raises(IndexNotQueryableError, match=r"Field 'metadata\.x' has an invalid mapping"):
        mongo.search_indexes.wait_queryable(turns, "text")


def test_query_time_checks_use_the_serving_definition_during_an_update(mongo, monkeypatch) -> None:
    """A partition key declared after the text index was built: the rebuild's new definition is
    accepted at once (``latestDefinition``) but serves only once built. Until then a text or
    hybrid search filtering on it is refused with a clear error, never answered empty."""
    monkeypatch.setattr(atlas, "UPDATE_DELAY_S", 0.8)
    semantic = mongo.db["semantic"]
    declared = mongo.search_indexes.definition(semantic, "text")
    mongo.search_indexes.update(semantic, "text", _with_token(declared, "engagement_id"))
    scoped = ReadFilter(user_id="u", metadata={"metadata.engagement_id": "e1"})
    with pytest.raises(StoreError, match=r"does not serve metadata\.engagement_id yet"):
        mongo.search_text("semantic", "refund", scoped, 5)
    mongo.ensure_vector_table("semantic", MODEL, 4)
    with pytest.raises(StoreError, match=r"does not serve metadata\.engagement_id yet"):
        mongo.search_hybrid("semantic", "refund", near([1.0, 0.0, 0.0, 0.0]), scoped, 5, 20)
    mongo.search_indexes.wait_queryable(semantic, "text")
    assert mongo.search_text("semantic", "refund", scoped, 5) == []


def _with_token(definition: dict, key: str) -> dict:
    mappings = dict(definition["mappings"])
    fields = dict(mappings.get("fields", {}))
    metadata = dict(fields.get("metadata", {"type": "document", "fields": {}}))
    metadata["fields"] = {**metadata.get("fields", {}), key: {"type": "token"}}
    fields["metadata"] = metadata
    return {**definition, "mappings": {**mappings, "fields": fields}}


def test_a_memory_written_a_moment_ago_is_a_reconciliation_candidate_despite_index_lag(
    mongo, monkeypatch
) -> None:
    """Search sees writes only after its sync delay: two restatements a moment apart must still
    meet (the second REINFORCES), so recent writes are compared directly."""
    from datetime import UTC, datetime

    from mempipe.domain.scope import scope_of
    from mempipe.schemas.identity import Visibility
    from mempipe.schemas.memory import EpisodicMemory

    monkeypatch.setattr(atlas, "SYNC_DELAY_S", 60.0)
    mongo.ensure_vector_table("episodic", MODEL, 4)
    now = datetime.now(UTC)
    event = EpisodicMemory(
        id="e1",
        org_id="o",
        project_id="p",
        user_id="u",
        text="User met Ana at the Lisbon office.",
        has_embedding=True,
        embedding_model_id=MODEL,
        created_at=now,
        updated_at=now,
    )
    with mongo.write_transaction():
        mongo.add_memory("episodic", event, [1.0, 0.0, 0.0, 0.0])
    scope = scope_of("o", "p", "u", None, Visibility.PRIVATE)
    found = mongo.memory_candidates(
        CandidateQuery(memory_type="episodic", scope=scope, near=near([1.0, 0.0, 0.0, 0.0]), k=5)
    )
    assert [(c.memory_id, round(c.similarity or 0, 6)) for c in found] == [("e1", 1.0)]
    elsewhere = scope_of("o", "p", "someone-else", None, Visibility.PRIVATE)
    assert (
        mongo.memory_candidates(
            CandidateQuery(memory_type="episodic", scope=elsewhere, near=near([1.0, 0, 0, 0]), k=5)
        )
        == []
    )


def test_a_text_index_without_stemming_or_speaker_names_is_drift_until_forced(mongo) -> None:
    """A deployment whose turns' text index predates stemming and names (``content`` analysed
    by the default analyzer) reports it, and a forced rebuild updates it."""
    turns = mongo.db["turns"]
    declared = mongo.search_indexes.definition(turns, "text")
    fields = dict(declared["mappings"]["fields"])
    fields.pop("name")
    fields["content"] = {"type": "string"}
    mongo.search_indexes.update(
        turns, "text", {"mappings": {**declared["mappings"], "fields": fields}}
    )
    mongo.search_indexes.wait_queryable(turns, "text")

    (drift,) = [s for s in mongo.index_status() if s.kind == "text" and s.collection == "stm"]
    assert drift.state.value == "drift"
    assert drift.differences == [
        "text fields {'content': None}, declared "
        "{'content': 'lucene.english', 'name': 'lucene.english'}"
    ]
    mongo.rebuild_indexes(force=True)
    mongo.search_indexes.wait_queryable(turns, "text")
    (fixed,) = [s for s in mongo.index_status() if s.kind == "text" and s.collection == "stm"]
    assert fixed.state.value == "ok"
