"""The MongoDB adapter on mongomock with the Atlas fake: what it really sends, in-server hybrid
ranking, a write transaction that fails as a whole, a standalone server refused, and its
indexes."""

from __future__ import annotations

from datetime import UTC, datetime

import mongomock
import pytest
from pymongo.errors import BulkWriteError

from mempipe.adapters.store.factory import finish_opening
from mempipe.adapters.store.mongo.factory import open_mongo_store
from mempipe.errors import StoreError
from mempipe.schemas.audit import AuditRow, ReconcileAction
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.search import Near, ReadFilter
from mempipe.schemas.snapshot import ExtractionState, ExtractionStatus
from mempipe.schemas.turn import SourceLocation, Turn
from tests.fakes import atlas

T0 = datetime(2024, 1, 1, tzinfo=UTC)
MODEL = "hashing-4"
DONE = ExtractionState(handler="semantic", status=ExtractionStatus.DONE, attempts=1)


def near(vector: list[float]) -> Near:
    return Near(vector=vector, model_id=MODEL)


@pytest.fixture
def sent(monkeypatch) -> list[list[dict]]:
    """Every aggregation pipeline the adapter sends."""
    pipelines: list[list[dict]] = []
    atlas.install()
    original = mongomock.Collection.aggregate

    def recording(self, pipeline, *args, **kwargs):
        pipelines.append(pipeline)
        return original(self, pipeline, *args, **kwargs)

    monkeypatch.setattr(mongomock.Collection, "aggregate", recording)
    return pipelines


@pytest.fixture
def store():
    opened = finish_opening(open_mongo_store("mongodb://mongomock/unit", client=atlas.client()))
    yield opened
    opened.close()


def memory(n: int, user: str, text: str, **fields) -> SemanticMemory:
    return SemanticMemory(
        id=f"m{n}",
        org_id="o",
        project_id="p",
        user_id=user,
        text=text,
        label=f"label{n}",
        created_at=T0,
        updated_at=T0,
        **fields,
    )


def vectored(n: int, user: str, text: str, vector: list[float]) -> tuple[SemanticMemory, list]:
    return memory(n, user, text, has_embedding=True, embedding_model_id=MODEL), vector


def fill(store, records) -> None:
    store.ensure_vector_table("semantic", MODEL, 4)
    with store.write_transaction():
        for record, vector in records:
            store.add_memory("semantic", record, vector)


def test_the_k_nearest_are_the_k_nearest_in_scope(store, sent) -> None:
    others = [vectored(n, "other", f"refund {n}", [1.0, 0.0, 0.0, 0.01 * n]) for n in range(20)]
    fill(store, [*others, vectored(99, "me", "refund mine", [0.0, 1.0, 0.0, 0.0])])
    hits = store.search_vector("semantic", near([1.0, 0.0, 0.0, 0.0]), ReadFilter(user_id="me"), 1)
    assert [h.id for h in hits] == ["m99"]
    stage = sent[-1][0]["$vectorSearch"]
    assert stage["filter"]["user_id"] == {"$eq": "me"}
    assert stage["limit"] == 1


def test_hybrid_finds_by_vector_only_and_by_text_only(store, sent) -> None:
    fill(
        store,
        [
            vectored(1, "u", "passport renewal steps", [1.0, 0.0, 0.0, 0.0]),
            (memory(2, "u", "refund policy for flights"), None),
        ],
    )
    hits = store.search_hybrid(
        "semantic", "refund", near([1.0, 0.0, 0.0, 0.0]), ReadFilter(user_id="u"), 5, 20
    )
    assert {h.id for h in hits} == {"m1", "m2"}, "one found by vector only, one by text only"


def test_hybrid_fuses_the_text_and_vector_lists_here(store, sent) -> None:
    fill(store, [vectored(1, "u", "refund policy", [1.0, 0.0, 0.0, 0.0])])
    hits = store.search_hybrid(
        "semantic", "refund", near([1.0, 0.0, 0.0, 0.0]), ReadFilter(user_id="u"), 5, 20
    )
    assert [h.id for h in hits] == ["m1"]
    assert [next(iter(p[0])) for p in sent[-2:]] == ["$search", "$vectorSearch"]


def crash_after(store, steps, crash: bool = True) -> None:
    with store.write_transaction():
        for step in steps:
            step()
        if crash:
            raise RuntimeError("crash")


def test_a_failed_write_transaction_leaves_none_of_its_writes(store) -> None:
    fill(store, [(memory(1, "u", "home airport JFK"), None), (memory(2, "u", "likes tea"), None)])
    row = AuditRow(
        run_id="r",
        at=T0,
        day=T0.date(),
        org_id="o",
        project_id="p",
        memory_type="semantic",
        action=ReconcileAction.ADD,
        memory_id="m3",
        version=1,
        text="x",
    )
    assert store.capabilities.transactions
    steps = [
        lambda: store.supersede_memory("semantic", "m1"),
        lambda: store.add_memory("semantic", memory(3, "u", "home airport LIS"), None),
        lambda: store.reinforce_memory("semantic", "m2", "snap"),
        lambda: store.add_audit([row]),
    ]
    with pytest.raises(RuntimeError, match="crash"):
        crash_after(store, steps)
    assert store.get_memory("semantic", "m1")["status"] == "active"
    assert store.get_memory("semantic", "m3") is None
    m2 = store.get_memory("semantic", "m2")
    assert (m2["reinforcement_count"], m2["evidence"]) == (0, [])
    assert list(store.audit_rows()) == []


def test_an_extraction_state_change_rolls_back_with_the_rest(store) -> None:
    store.db["snapshots"].insert_one(
        {"_id": "s1", "extraction": {"semantic": {"status": "pending", "attempts": 0}}}
    )
    with pytest.raises(RuntimeError, match="crash"):
        crash_after(store, [lambda: store.set_extraction_state("s1", DONE)])
    state = store.db["snapshots"].find_one({"_id": "s1"})["extraction"]["semantic"]
    assert state["status"] == "pending"


def test_a_standalone_server_is_refused_when_the_store_is_opened() -> None:
    atlas.install()
    standalone = mongomock.MongoClient(tz_aware=True)
    with pytest.raises(StoreError, match=r"no multi-document transactions \(a standalone server\)"):
        open_mongo_store("mongodb://mongomock/standalone", client=standalone)


def test_a_second_active_record_for_one_key_and_scope_is_refused(store) -> None:
    fill(store, [(memory(1, "u", "home airport JFK"), None)])
    twin = memory(2, "u", "home airport OSL").model_copy(update={"label": "label1"})
    with pytest.raises(StoreError, match=r"[Dd]uplicate"):
        crash_after(store, [lambda: store.add_memory("semantic", twin, None)], crash=False)


def test_migrations_create_the_identity_indexes_and_the_unique_turn_key(store) -> None:
    turn_indexes = store.db["turns"].index_information()
    assert turn_indexes["turn_key"]["unique"]
    assert [k for k, _ in turn_indexes["turn_key"]["key"]] == [
        "org_id",
        "project_id",
        "user_id",
        "session_id",
        "turn_seq",
    ], "two users may reuse a session id"
    assert "identity" in store.db["semantic"].index_information()
    names = {i["name"] for i in store.db["turns"].list_search_indexes()}
    assert names == {"text"}


def test_a_text_filter_on_a_key_the_index_lacks_is_refused_not_answered_empty(store) -> None:
    store.declare(["engagement_id"], [])
    with pytest.raises(StoreError, match="rebuild-indexes --force"):
        store.search_text(
            "semantic", "refund", ReadFilter(metadata={"metadata.engagement_id": "e"}), 5
        )
    store.rebuild_indexes(force=True)
    assert (
        store.search_text(
            "semantic", "refund", ReadFilter(metadata={"metadata.engagement_id": "e"}), 5
        )
        == []
    )


def test_a_write_error_other_than_a_duplicate_comes_back_as_a_reject(store, monkeypatch) -> None:
    turns = [
        Turn(
            org_id="o",
            project_id="p",
            session_id="s",
            turn_seq=n,
            role="user",
            content=f"turn {n}",
            source=SourceLocation(path="a.jsonl", line=n + 1),
        )
        for n in range(3)
    ]
    store.add_turns(turns[:1], "r")
    original = mongomock.Collection.bulk_write

    def refuses_the_third(self, requests, **kwargs):
        try:
            result = original(self, requests[:2], **kwargs)
        except BulkWriteError as exc:
            exc.details["writeErrors"].append(
                {"index": 2, "code": 121, "errmsg": "Document failed validation"}
            )
            raise
        raise AssertionError(f"the first turn is a duplicate: {result}")

    monkeypatch.setattr(mongomock.Collection, "bulk_write", refuses_the_third)
    result = store.add_turns(turns, "r")
    assert (result.inserted, result.duplicates) == (1, 1)
    (reject,) = result.conflicts
    assert (reject.path, reject.line) == ("a.jsonl", 3)
    assert reject.reason == "write error 121: Document failed validation"


def test_a_search_index_created_meanwhile_by_another_worker_is_not_an_error(store) -> None:
    turns = store.db["turns"]
    definition = store.search_indexes.definition(turns, "text")
    assert store.search_indexes.create(turns, "text", "search", definition) is False
