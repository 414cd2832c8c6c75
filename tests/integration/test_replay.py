"""Extraction replay on a real SQLite store: reconciliation, unembeddable memories, resuming,
recorded failures, scopes (DESIGN rules on reconciliation, failures and embedding)."""

from __future__ import annotations

import json

import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.llm.offline import OfflineExtractor
from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import ContentError, FailureKind, RetryPolicy
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.work import WorkQuery
from mempipe.services.replay.extract import replay_batch, replay_one
from tests.fakes.openai_server import error, fake_openai
from tests.stores import HANDLERS, load, replay_all, replay_context


def memories(store) -> list[tuple]:
    rows = []
    for kind in ("semantic", "episodic", "procedural", "taxonomic"):
        rows += store._conn.execute(
            f"SELECT id, text, status, version, supersedes_id, reinforcement_count, evidence, "
            f"has_embedding FROM memories_{kind} ORDER BY id"
        ).fetchall()
    return rows


def audit(store) -> list[tuple]:
    return [
        (r.action, r.memory_type, r.memory_id, r.version, r.superseded_id, r.snapshot_id, r.text)
        for r in store.audit_rows()
    ]


def test_a_changed_fact_updates_a_restated_one_reinforces_and_history_is_kept(
    store, tmp_path
) -> None:
    load(store, tmp_path)
    results = replay_all(store, replay_context())
    assert all(r.status == "done" for r in results)
    rows = {(r.action.value, r.text) for r in store.audit_rows()}
    assert ("UPDATE", "User's home airport is LIS.") in rows
    assert ("REINFORCE", "User prefers a window seat on long flights.") in rows
    assert ("ADD", "User's home airport is JFK.") in rows
    update = next(r for r in store.audit_rows() if r.text == "User's home airport is LIS.")
    new = store.get_memory("semantic", update.memory_id)
    old = store.get_memory("semantic", update.superseded_id)
    assert (new["version"], new["status"], new["supersedes_id"]) == (2, "active", old["id"])
    assert (old["text"], old["status"], old["version"]) == (
        "User's home airport is JFK.",
        "superseded",
        1,
    )
    seat = next(r for r in store.audit_rows() if r.action.value == "REINFORCE")
    reinforced = store.get_memory("semantic", seat.memory_id)
    assert reinforced["reinforcement_count"] == 1
    assert len(set(reinforced["evidence"])) == 2


def test_replaying_again_redoes_nothing_and_force_counts_the_same_snapshot_once(
    store, tmp_path
) -> None:
    load(store, tmp_path)
    replay_all(store, replay_context())
    before = (memories(store), audit(store))
    assert store.extraction_work(WorkQuery(handlers=HANDLERS)) == []
    forced = store.extraction_work(WorkQuery(handlers=HANDLERS, force=True))
    for item in forced:
        replay_one(UnitOfWork(store), item, replay_context(run_id="again"))
    assert (memories(store), audit(store)) == before


def test_a_replay_killed_mid_run_resumes_to_the_same_store_and_audit(tmp_path) -> None:
    from mempipe.adapters.store import open_store

    whole = open_store(f"sqlite:///{tmp_path / 'whole.db'}", migrate=True)
    load(whole, tmp_path)
    replay_all(whole, replay_context())

    killed = open_store(f"sqlite:///{tmp_path / 'killed.db'}", migrate=True)
    load(killed, tmp_path)

    class DiesAfter(HashingEmbedder):
        calls = 0

        def embed(self, texts):
            DiesAfter.calls += 1
            if DiesAfter.calls == 4:
                raise KeyboardInterrupt("killed")
            return super().embed(texts)

    with pytest.raises(KeyboardInterrupt):
        replay_all(killed, replay_context(embedder=DiesAfter(64)))
    done_before_restart = len(audit(killed))
    assert 0 < done_before_restart < len(audit(whole))
    replay_all(killed, replay_context(run_id="restart"))
    assert memories(killed) == memories(whole)
    assert audit(killed) == audit(whole)


class RefusesLisbon(HashingEmbedder):
    """An embedding provider that rejects any input mentioning LIS (say, as too long)."""

    def embed(self, texts):
        if any("LIS" in t for t in texts):
            raise ContentError(FailureKind.BAD_REQUEST, "input rejected by the provider")
        return super().embed(texts)


class Recording(HashingEmbedder):
    """Keeps every text it is asked to embed."""

    def __init__(self, dimensions: int) -> None:
        super().__init__(dimensions)
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts += list(texts)
        return super().embed(texts)


def test_a_fact_restated_in_one_batch_is_embedded_once_and_still_reinforced(
    store, tmp_path
) -> None:
    load(store, tmp_path)
    embedder = Recording(64)
    work = store.extraction_work(WorkQuery(handlers=["semantic"]))
    results = replay_batch(UnitOfWork(store), work, replay_context(embedder=embedder))
    seat = "User prefers a window seat on long flights."
    assert embedder.texts.count(seat) == 1
    assert len(embedder.texts) == len(set(embedder.texts))
    assert sum(r.extracted for r in results) > len(embedder.texts), "some text came twice"
    assert ("REINFORCE", seat) in {(r.action.value, r.text) for r in store.audit_rows()}
    assert store._conn.execute(
        "SELECT count(*) FROM memories_semantic WHERE has_embedding = 0"
    ).fetchall() == [(0,)]


def test_a_memory_that_cannot_be_embedded_is_stored_without_a_vector_and_the_rest_are(
    store, tmp_path
) -> None:
    load(store, tmp_path)
    replay_all(store, replay_context(embedder=RefusesLisbon(64)), handlers=["semantic"])
    by_text = {m[1]: m[7] for m in memories(store)}
    assert by_text["User's home airport is LIS."] == 0
    assert by_text["User lives in Lisbon."] == 1
    assert by_text["User's home airport is JFK."] == 1
    lis = store._conn.execute(
        "SELECT rowid FROM memories_semantic WHERE text = ?", ("User's home airport is LIS.",)
    ).fetchall()[0][0]
    vectors = store._conn.execute(
        "SELECT count(*) FROM vec_semantic__hashing_64 WHERE memory_rowid = ?", (lis,)
    ).fetchall()[0][0]
    assert vectors == 0
    found = store._conn.execute(
        "SELECT count(*) FROM memories_semantic_fts WHERE memories_semantic_fts MATCH 'LIS'"
    ).fetchall()[0][0]
    assert found == 1, "text search still finds it"
    failures = store._conn.execute("SELECT step, failure_class FROM failures").fetchall()
    assert ("embed:semantic", "content") in failures

    from mempipe.services.reembed.fill import embed_collection

    retried = embed_collection(
        UnitOfWork(store),
        "semantic",
        HashingEmbedder(64),
        run_id="nightly",
        batch_size=10,
        state="serving",
    )
    assert retried.embedded_now == 1, "the next re-embed run retries it"
    assert {m[1]: m[7] for m in memories(store)}["User's home airport is LIS."] == 1


def test_reconciliation_stays_inside_the_memory_scope(store, tmp_path) -> None:
    archive = tmp_path / "two-users.jsonl"
    archive.write_text(
        "".join(
            json.dumps({"session_id": s, "user_id": u, "role": "user", "content": text}) + "\n"
            for s, u, text in [
                ("a", "ann", "My home airport is JFK."),
                ("b", "bob", "My home airport is LIS."),
            ]
        )
    )
    load(store, tmp_path, archive, user="unknown")
    replay_all(store, replay_context(), handlers=["semantic"])
    assert [r.action.value for r in store.audit_rows()] == ["ADD", "ADD"]
    active = store._conn.execute(
        "SELECT user_id, text FROM memories_semantic WHERE status = 'active' ORDER BY user_id"
    ).fetchall()
    assert active == [
        ("ann", "User's home airport is JFK."),
        ("bob", "User's home airport is LIS."),
    ]


def test_failed_extractions_are_recorded_by_class_and_only_retryable_ones_come_back(
    store, tmp_path
) -> None:
    load(store, tmp_path)
    policy = RetryPolicy(max_attempts=2, network_base=0.0)
    with fake_openai() as (fake, url):
        extractor = OpenAIExtractor(LLMSettings(base_url=url, model="m", api_key="k"))
        ctx = replay_context(extractor=extractor, retry=policy, sleep=lambda s: None)
        work = store.extraction_work(WorkQuery(handlers=["semantic", "taxonomic"]))
        outage = next(w for w in work if w.handler == "semantic")
        too_long = next(w for w in work if w.handler == "taxonomic")
        fake.script = [error(503, "overloaded")]
        down = replay_one(UnitOfWork(store), outage, ctx)
        fake.script = [error(400, "maximum context length exceeded", "context_length_exceeded")]
        refused = replay_one(UnitOfWork(store), too_long, ctx)
    assert (down.status, down.failure_class, down.attempts) == (
        "failed_retryable",
        "environmental",
        2,
    )
    assert (refused.status, refused.failure_class, refused.attempts) == (
        "failed_content",
        "content",
        1,
    )
    recorded = store._conn.execute(
        "SELECT step, failure_class, error_type, attempts, snapshot_id FROM failures "
        "WHERE step LIKE 'extract:%' ORDER BY id"
    ).fetchall()
    summaries = store._conn.execute(
        "SELECT step, failure_class FROM failures WHERE step = 'summarize' ORDER BY id"
    ).fetchall()
    assert summaries == [("summarize", "environmental"), ("summarize", "content")]
    assert recorded == [
        ("extract:semantic", "environmental", "server", 2, outage.snapshot_id),
        ("extract:taxonomic", "content", "context_too_long", 1, too_long.snapshot_id),
    ]
    again = store.extraction_work(WorkQuery(handlers=["semantic", "taxonomic"]))
    keys = {(w.snapshot_id, w.handler) for w in again}
    assert (outage.snapshot_id, "semantic") in keys
    assert (too_long.snapshot_id, "taxonomic") not in keys
    assert store.stats().memories["semantic"] == {"active": 0, "superseded": 0}


def test_the_llm_extractor_writes_the_snapshot_summary(store, tmp_path) -> None:
    from tests.fakes.openai_server import completion
    from tests.fakes.openai_server import memories as answer

    load(store, tmp_path)
    item = store.extraction_work(WorkQuery(handlers=["semantic"]))[0]
    with fake_openai() as (fake, url):
        fake.script = [completion("Maya introduced herself and her home airport."), answer()]
        extractor = OpenAIExtractor(LLMSettings(base_url=url, model="m", api_key="k"))
        result = replay_one(UnitOfWork(store), item, replay_context(extractor=extractor))
    assert result.status == "done"
    summary, source = store._conn.execute(
        "SELECT summary, summary_source FROM snapshots WHERE id = ?", (item.snapshot_id,)
    ).fetchall()[0]
    assert (summary, source) == ("Maya introduced herself and her home airport.", "openai:m")


class JudgingExtractor(OfflineExtractor):
    """Reports fixed events and answers the judge with UPDATE, recording what it was asked."""

    capabilities = OfflineExtractor.capabilities.model_copy(update={"judge": True})

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def judge(self, text, existing):
        from mempipe.domain.reconcile import Verdict

        self.asked.append((text, existing.text))
        return Verdict.UPDATE


def test_a_configured_judge_decides_the_ambiguous_band(store, tmp_path) -> None:
    from mempipe.domain.reconcile import ReconcileThresholds

    archive = tmp_path / "events.jsonl"
    archive.write_text(
        "".join(
            json.dumps(
                {
                    "session_id": s,
                    "role": "user",
                    "content": c,
                    "created_at": f"2024-01-0{d}T10:00:00Z",
                }
            )
            + "\n"
            for s, c, d in [
                ("a", "I met Priya at the office.", 1),
                ("b", "I met Priya at the Lisbon office today.", 2),
            ]
        )
    )
    load(store, tmp_path, archive)
    judge = JudgingExtractor()
    wide = ReconcileThresholds(ambiguous_from=0.0, reinforce_at=0.999)
    replay_all(store, replay_context(extractor=judge, thresholds=wide), handlers=["episodic"])
    assert [r.action.value for r in store.audit_rows()] == ["ADD", "UPDATE"]
    assert judge.asked == [
        ("User met Priya at the Lisbon office today.", "User met Priya at the office.")
    ]


def test_one_active_record_per_key_and_scope_backs_up_the_write_lock(store) -> None:
    """Two workers reconciling one scope cannot both ADD the same keyed fact."""
    from datetime import UTC, datetime

    import apsw

    from mempipe.schemas.memory import SemanticMemory

    now = datetime.now(UTC)
    fact = {
        "org_id": "o",
        "project_id": "p",
        "user_id": "u",
        "label": "home_airport",
        "created_at": now,
        "updated_at": now,
    }
    with store.write_transaction():
        store.add_memory("semantic", SemanticMemory(id="m1", text="JFK", **fact), None)
    with pytest.raises(apsw.ConstraintError), store.write_transaction():
        store.add_memory("semantic", SemanticMemory(id="m2", text="JFK", **fact), None)
    assert store.get_memory("semantic", "m2") is None
