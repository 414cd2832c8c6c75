"""Every job runs unchanged on the MongoDB adapter: the same flows, only the store URL differs.

The server here is mongomock with the Atlas search fake (no MongoDB server can run on these
machines); ``MEMPIPE_MONGODB_URI`` runs the contract suite against a real one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mempipe.adapters.store import open_store
from mempipe.adapters.store.mongo import factory
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.errors import StoreError
from mempipe.flows.backfill import backfill_flow
from mempipe.flows.indexes import rebuild_indexes_flow
from mempipe.flows.reembed import reembed_finalize_flow, reembed_flow, reembed_rollback_flow
from mempipe.flows.replay import replay_flow
from mempipe.flows.report import audit_report_flow
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.search import search
from tests.fakes import atlas
from tests.helpers import audit_actions

pytestmark = pytest.mark.prefect
SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"


@pytest.fixture
def mongo_url(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every store opened on this URL talks to one mongomock server with the Atlas fake, as
    strict as Atlas: a replica set with transactions, indexes that build, update and drop over
    time, search that lags writes."""
    server = atlas.client()
    monkeypatch.setattr(factory, "MongoClient", lambda url, **options: server)
    for name, delay in atlas.STRICT.items():
        monkeypatch.setattr(atlas, name, delay)
    monkeypatch.setenv("MEMPIPE_MONGODB_INDEX_POLL", "0.02")
    return "mongodb://mongomock:27017/jobs"


def config(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "project-config.yaml"
    path.write_text(
        "memory:\n  extraction:\n    enabled: [semantic, episodic, procedural, taxonomic]\n"
        f"  embedding:\n    model: hashing-128\n{extra}"
    )
    return str(path)


def backfill_and_replay(url: str, tmp_path: Path, name: str) -> tuple[object, Path]:
    cfg = config(tmp_path)
    backfill_flow(
        paths=[str(SAMPLE)],
        user_id="maya",
        store=url,
        config=cfg,
        rejects_dir=str(tmp_path / f"rejects-{name}"),
    )
    audit_dir = tmp_path / f"audit-{name}"
    summary = replay_flow(store=url, config=cfg, audit_dir=str(audit_dir), concurrency=2)
    return summary, audit_dir


def test_backfill_replay_and_report_give_the_same_memories_and_audit_as_sqlite(
    prefect_server, mongo_url, tmp_path
) -> None:
    on_mongo, mongo_audit = backfill_and_replay(mongo_url, tmp_path, "mongo")
    on_sqlite, sqlite_audit = backfill_and_replay(
        f"sqlite:///{tmp_path / 'reference.db'}", tmp_path, "sqlite"
    )
    assert (on_mongo.extractions, on_mongo.done) == (24, 24)
    assert (on_mongo.added, on_mongo.updated, on_mongo.reinforced) == (
        on_sqlite.added,
        on_sqlite.updated,
        on_sqlite.reinforced,
    )
    assert audit_actions(mongo_audit) == audit_actions(sqlite_audit)
    report = audit_report_flow(run_id=on_mongo.run_id, out=str(mongo_audit), store=mongo_url)
    assert report.rows == on_mongo.added + on_mongo.updated + on_mongo.reinforced
    store = open_store(mongo_url, migrate=True)
    stats = store.stats()
    store.close()
    assert stats.turns > 0
    assert stats.unpromoted_turns == 0
    assert stats.memories["semantic"]["superseded"] == on_sqlite.updated


def hashing_embedder(model_id: str):
    from mempipe.adapters.embedding import embedder_for

    return embedder_for(model_id)


def test_reembed_switches_models_with_search_answering_then_rolls_back_and_finalizes(
    prefect_server, mongo_url, tmp_path
) -> None:
    backfill_and_replay(mongo_url, tmp_path, "mongo")
    cfg = config(tmp_path)
    store = open_store(mongo_url, migrate=True)
    before = search(
        UnitOfWork(store),
        hashing_embedder,
        "home airport",
        "semantic",
        SearchMode.SEMANTIC,
        ReadFilter(),
    )
    assert before.hits, "the serving model answers before the move"

    summary = reembed_flow(model="hashing-64", store=mongo_url, config=cfg)
    assert summary.switched
    assert store.active_embedding("semantic") == ("hashing-64", 64)
    after = search(
        UnitOfWork(store),
        hashing_embedder,
        "home airport",
        "semantic",
        SearchMode.HYBRID,
        ReadFilter(),
    )
    assert after.hits
    assert {e.model_id for e in store.registry() if e.collection == "semantic"} == {
        "hashing-128",
        "hashing-64",
    }

    assert "semantic" in reembed_rollback_flow(store=mongo_url, config=cfg)
    assert store.active_embedding("semantic") == ("hashing-128", 128)
    assert store.db["semantic"].count_documents({"embedding_hashing_64": {"$exists": True}}) == 0

    reembed_flow(model="hashing-64", store=mongo_url, config=cfg)
    dropped = reembed_finalize_flow(store=mongo_url, config=cfg)
    assert "semantic:hashing-128" in dropped
    assert store.db["semantic"].count_documents({"embedding": {"$exists": True}}) == 0
    names = [i["name"] for i in store.db["semantic"].list_search_indexes()]
    assert sorted(names) == ["text", "vector_hashing_64"]
    store.close()


def test_an_added_partition_key_drifts_the_indexes_until_a_forced_rebuild(
    prefect_server, mongo_url, tmp_path
) -> None:
    backfill_and_replay(mongo_url, tmp_path, "mongo")
    keyed = config(tmp_path, "  metadata_partition_keys: [engagement_id]\n")
    report = rebuild_indexes_flow(store=mongo_url, config=keyed)
    assert report.drift > 0
    assert report.rebuilt == 0
    assert any("metadata.engagement_id" in d for s in report.indexes for d in s.differences)
    forced = rebuild_indexes_flow(force=True, store=mongo_url, config=keyed)
    assert forced.rebuilt == report.drift
    assert rebuild_indexes_flow(store=mongo_url, config=keyed).drift == 0


def test_an_index_that_never_becomes_queryable_fails_the_reembed_with_a_clear_error(
    prefect_server, mongo_url, tmp_path, monkeypatch
) -> None:
    backfill_and_replay(mongo_url, tmp_path, "mongo")
    monkeypatch.setattr(atlas, "NEVER_QUERYABLE", {"vector_hashing_64"})
    monkeypatch.setenv("MEMPIPE_MONGODB_INDEX_TIMEOUT", "0.3")
    with pytest.raises(StoreError, match=r"vector_hashing_64 is not queryable after 0.3 s"):
        reembed_flow(model="hashing-64", store=mongo_url, config=config(tmp_path))
    store = open_store(mongo_url, migrate=True)
    assert store.active_embedding("semantic") == ("hashing-128", 128), "nothing switched"
    store.close()


def gate_queries(url: str, path: Path) -> Path:
    """A labelled query per semantic memory: its own text should find it."""
    store = open_store(url, migrate=True)
    try:
        hits = search(
            UnitOfWork(store),
            hashing_embedder,
            "user",
            "semantic",
            SearchMode.TEXT,
            ReadFilter(),
            50,
        )
    finally:
        store.close()
    path.write_text(
        "".join(
            json.dumps({"query": h.text, "relevant_ids": [h.id], "user_id": h.user_id}) + "\n"
            for h in hits.hits
        )
    )
    return path


def test_the_recall_gate_waits_for_the_new_index_and_agrees_with_sqlite(
    prefect_server, mongo_url, tmp_path, monkeypatch
) -> None:
    """On Atlas a new vector index builds asynchronously: a gate measured on it before it
    answers would refuse a good model (or fail). The gate waits, then gives SQLite's verdict."""
    sqlite_url = f"sqlite:///{tmp_path / 'reference.db'}"
    verdicts = {}
    for name, url in (("sqlite", sqlite_url), ("mongo", mongo_url)):
        backfill_and_replay(url, tmp_path, name)
        queries = gate_queries(url, tmp_path / f"gate-{name}.jsonl")
        if name == "mongo":
            monkeypatch.setattr(atlas, "BUILD_DELAY_S", 1.0)
            monkeypatch.setenv("MEMPIPE_MONGODB_INDEX_TIMEOUT", "30")
        summary = reembed_flow(
            model="hashing-64", store=url, config=config(tmp_path), gate=str(queries)
        )
        assert summary.gate is not None
        verdicts[name] = (summary.gate.queries, summary.gate.ratio, summary.gate.passed)
        assert summary.switched
    assert verdicts["mongo"] == verdicts["sqlite"]


def test_a_move_previewed_on_mongodb_writes_nothing_and_predicts_its_gate(
    prefect_server, mongo_url, tmp_path
) -> None:
    """The preview reads the records and vectors through the MongoDB adapter as through
    SQLite's: a sample of every record predicts the gate the move then measures."""
    from tests.helpers import invoke

    backfill_and_replay(mongo_url, tmp_path, "mongo")
    queries = gate_queries(mongo_url, tmp_path / "gate.jsonl")
    cfg = config(tmp_path)
    store = open_store(mongo_url)
    before = store.stats(), store.registry()

    done = invoke(
        "reembed",
        "--model",
        "hashing-64",
        "--preview",
        "--sample",
        "1000",
        "--gate",
        str(queries),
        "--store",
        mongo_url,
        "--config",
        cfg,
        "--json",
    )

    assert done.exit_code == 0, done.output
    predicted = json.loads(done.stdout)["gate"]
    assert (store.stats(), store.registry()) == before, "nothing written"
    store.close()
    moved = reembed_flow(model="hashing-64", store=mongo_url, config=cfg, gate=str(queries))
    assert moved.gate is not None
    assert (predicted["new_recall"], predicted["ratio"]) == (
        moved.gate.new_recall,
        moved.gate.ratio,
    )


def test_a_bridge_on_mongodb_maps_the_query_before_vector_search_as_on_sqlite(
    prefect_server, mongo_url, tmp_path
) -> None:
    """The bridge is kept in MongoDB's registry, the switch's transaction retires it, and a
    query the serving model cannot embed is mapped before ``$vectorSearch``: the same answer
    as SQLite's through its own bridge, fitted on the same records."""
    from mempipe.adapters.embedding import embedder_for
    from mempipe.errors import ConfigError, IncompleteRunError

    archive = tmp_path / "seats.jsonl"
    archive.write_text(
        "".join(
            json.dumps({"session_id": f"s{n}", "role": "user", "content": f"seat {n} aisle {n}"})
            + "\n"
            for n in range(160)
        )
    )
    gate = tmp_path / "gate.jsonl"
    gate.write_text(json.dumps({"query": "seat 9 aisle", "relevant_ids": ["s9#0"]}) + "\n")

    def refusing(model_id: str):
        if model_id == "hashing-128":
            raise ConfigError("hashing-128: the model is no longer served")
        return embedder_for(model_id)

    answers = {}
    for name, url in (("sqlite", f"sqlite:///{tmp_path / 'reference.db'}"), ("mongo", mongo_url)):
        cfg = config(tmp_path)
        backfill_flow(paths=[str(archive)], user_id="ann", store=url, config=cfg, embed=True)
        with pytest.raises(IncompleteRunError):  # an impossible gate: the bridge outlives the run
            reembed_flow(
                model="hashing-64",
                collections=["stm"],
                bridge=True,
                sample=160,
                gate=str(gate),
                gate_source="stm",
                min_recall_ratio=10,
                store=url,
                config=cfg,
            )
        store = open_store(url, migrate=True)
        found = search(
            UnitOfWork(store), refusing, "seat 9 aisle", "stm", SearchMode.SEMANTIC, ReadFilter()
        )
        assert found.bridge is not None
        assert found.bridge.query_model == "hashing-64"
        assert "no longer served" in found.bridge.reason
        answers[name] = [h.id for h in found.hits[:3]]
        reembed_flow(model="hashing-64", collections=["stm"], store=url, config=cfg)
        assert store.bridges() == [], "the switch retired it"
        store.close()
    assert answers["mongo"] == answers["sqlite"]
    assert answers["mongo"], "the bridge found records"


def test_forget_on_mongodb_forgets_what_it_does_on_sqlite_and_search_leaves_it_out_before(
    prefect_server, mongo_url, tmp_path
) -> None:
    """The retention flow on the MongoDB adapter: the same plan, the same records forgotten
    (counted by user, collection and rule), the same FORGET rows as on SQLite; before the run,
    a search already leaves out what the policy expires."""
    from mempipe.flows.forget import retention_flow
    from mempipe.retention import keep_policy
    from mempipe.schemas.retention import RetentionPolicy

    retention = (
        "  retention:\n    turns: {max_age: 30d}\n    semantic: {max_per_user: 2}\n"
        "    keep_versions: 0\n"
    )
    sqlite = f"sqlite:///{tmp_path / 'reference.db'}"
    for url, name in ((mongo_url, "mongo"), (sqlite, "sqlite")):
        backfill_and_replay(url, tmp_path, name)
    cfg = config(tmp_path, retention)
    keep_policy(RetentionPolicy.model_validate({"turns": {"max_age": "30d"}}))
    found = search(
        UnitOfWork(open_store(mongo_url)),
        hashing_embedder,
        "window seat",
        "stm",
        SearchMode.TEXT,
        ReadFilter(user_id="maya"),
        10,
    )
    assert found.hits == []
    assert "retention policy has expired" in found.notes[0]
    keep_policy(None)
    summaries = {
        name: retention_flow(as_of="2024-08-01T00:00:00+00:00", store=url, config=cfg)
        for url, name in ((mongo_url, "mongo"), (sqlite, "sqlite"))
    }
    counted = {
        name: {(c.collection, c.rule): c.records for c in s.counts} for name, s in summaries.items()
    }
    assert counted["mongo"] == counted["sqlite"]
    assert counted["mongo"][("turns", "turns.max_age")] == 20
    store = open_store(mongo_url)
    try:
        assert store.stats().turns == 0
        forgotten = [r for r in store.audit_rows() if r.action.value == "FORGET"]
    finally:
        store.close()
    assert len(forgotten) == summaries["mongo"].forgotten
    assert {r.text for r in forgotten} == {""}
