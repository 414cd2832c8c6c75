"""The MongoDB adapter inside real transaction semantics (the fake of
:mod:`tests.fakes.transactions`): an error inside a transaction aborts it, and no transaction
modifies more documents than the server allows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from mempipe.adapters.store.factory import finish_opening
from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import REGISTRY
from mempipe.adapters.store.mongo.client import MongoStore
from mempipe.adapters.store.mongo.factory import open_mongo_store
from mempipe.domain.promotion import cut_snapshots
from mempipe.schemas.config import PromotionLimits
from mempipe.schemas.embedding import ModelRegistration
from mempipe.schemas.turn import SourceLocation, Turn
from tests.fakes import atlas, transactions

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def replica_set() -> Iterator[MongoStore]:
    client = atlas.client()
    opened = finish_opening(open_mongo_store("mongodb://mongomock/txn", client=client))
    assert isinstance(opened, MongoStore)
    yield opened
    opened.close()


def turns(sessions: int, per_session: int) -> list[Turn]:
    return [
        Turn(
            org_id="o",
            project_id="p",
            user_id="u",
            session_id=f"s{session}",
            turn_seq=seq,
            role="user" if seq % 2 == 0 else "assistant",
            content=f"session {session} turn {seq}",
            created_at=T0 + timedelta(minutes=seq),
            source=SourceLocation(path="a.jsonl", line=session * per_session + seq + 1),
        )
        for session in range(sessions)
        for seq in range(per_session)
    ]


def snapshots_of(store: MongoStore) -> list:
    return list(
        cut_snapshots(store.iter_unpromoted_turns(), PromotionLimits(), handlers=["semantic"])
    )


def test_a_snapshot_already_stored_does_not_abort_the_transaction_that_promotes_its_turns(
    replica_set,
) -> None:
    """Two promotions racing, or one interrupted: a snapshot is stored, its turns are not yet
    marked. Saving it again must mark them, not die on a duplicate key that aborted the
    transaction (and then on NoSuchTransaction, on every retry)."""
    replica_set.add_turns(turns(3, 4), "r")
    cut = snapshots_of(replica_set)
    assert len(cut) == 3
    replica_set.db["snapshots"].insert_one(
        {**documents.snapshot_document(cut[1], T0), "_id": cut[1].snapshot_id}
    )
    created = replica_set.add_snapshots(cut)
    assert created == {cut[0].snapshot_id, cut[2].snapshot_id}
    assert replica_set.count_unpromoted_turns() == 0
    assert replica_set.db["snapshots"].count_documents({}) == 3


def test_promotion_of_many_sessions_runs_in_transactions_of_bounded_size(
    replica_set, monkeypatch
) -> None:
    """At a tenth of the server's scale: a transaction may modify 100 documents, the adapter
    budgets 50 a transaction (1,000 and 500 in production)."""
    from mempipe.adapters.store.mongo import turns as mongo_turns

    monkeypatch.setattr(transactions, "MAX_WRITES", 100)
    monkeypatch.setattr(mongo_turns, "TRANSACTION_BUDGET", 50)
    replica_set.add_turns(turns(40, 3), "r")
    cut = snapshots_of(replica_set)
    assert len(cut) == 40, "160 documents: more than one transaction may write"
    client = replica_set._client
    client.largest_transaction = 0
    assert len(replica_set.add_snapshots(cut)) == 40
    assert replica_set.count_unpromoted_turns() == 0
    assert 0 < client.largest_transaction <= transactions.MAX_WRITES


RECORDS = 2_000
OLD, NEW = "hashing-4", "hashing-8"
UNEMBEDDABLE = {7, 1_000, 1_999}


def loaded(store: MongoStore) -> str:
    """2,000 semantic records served by OLD, each but three with a NEW vector beside it."""
    store.register_model(
        ModelRegistration(collection="semantic", model_id=OLD, dimensions=4, state="serving")
    )
    store.register_model(
        ModelRegistration(collection="semantic", model_id=NEW, dimensions=8, state="building")
    )
    new_path = store._entry("semantic", NEW)["path"]
    old_path = store._entry("semantic", OLD)["path"]
    # mongomock checks unique indexes by scanning: without them the inserts take a moment.
    store.db["semantic"].drop_indexes()
    store.db["semantic"].insert_many(
        [
            {
                "_id": n,
                "id": f"m{n}",
                "text": f"fact {n}",
                "label": f"fact_{n}",
                "org_id": "o",
                "project_id": "p",
                "status": "active",
                old_path: [1.0, 0.0, 0.0, 0.0],
                **({} if n in UNEMBEDDABLE else {new_path: [0.0] * 7 + [1.0]}),
                "has_embedding": True,
                "embedding_model_id": OLD,
            }
            for n in range(1, RECORDS + 1)
        ]
    )
    return new_path


def stamps(store: MongoStore) -> dict[tuple[bool, str | None], int]:
    found: dict[tuple[bool, str | None], int] = {}
    for d in store.db["semantic"].find({}, {"has_embedding": 1, "embedding_model_id": 1}):
        key = (d["has_embedding"], d["embedding_model_id"])
        found[key] = found.get(key, 0) + 1
    return found


def test_a_switch_over_many_records_runs_in_small_transactions_and_resumes_after_a_crash(
    replica_set, monkeypatch
) -> None:
    from mempipe.adapters.store.mongo import registry

    monkeypatch.setattr(registry, "STAMP_BATCH", 200)
    loaded(replica_set)
    client = replica_set._client
    client.largest_transaction = 0
    calls = {"n": 0}
    original = type(replica_set.db["semantic"]).update_many

    def crashing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt("the process is killed mid-stamping")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(replica_set.db["semantic"]), "update_many", crashing)
    with pytest.raises(KeyboardInterrupt):
        replica_set.switch_models(["semantic"], NEW)
    monkeypatch.setattr(type(replica_set.db["semantic"]), "update_many", original)
    assert replica_set.active_embedding("semantic") == (NEW, 8), "the switch itself committed"
    partial = stamps(replica_set)
    assert partial.get((True, OLD), 0) > 0, "the crash left records unstamped"

    replica_set.switch_models(["semantic"], NEW)

    expected = {(True, NEW): RECORDS - len(UNEMBEDDABLE), (False, None): len(UNEMBEDDABLE)}
    assert stamps(replica_set) == expected, "the same end state as an uninterrupted switch"
    assert replica_set.db[REGISTRY].count_documents({"stamping": True}) == 0, "pass finished"
    assert 0 < client.largest_transaction <= 4, "only registry entries change in a transaction"
