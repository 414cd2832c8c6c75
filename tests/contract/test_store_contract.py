"""What every store backend must do, through the port only (no backend internals)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mempipe.domain.scope import scope_of
from mempipe.errors import ConfigError, StoreError
from mempipe.schemas.audit import AuditRow, AuditSelection, ReconcileAction
from mempipe.schemas.batch import BatchStatus, ProviderBatch
from mempipe.schemas.config import CustomTypeConfig
from mempipe.schemas.costs import SpendRow
from mempipe.schemas.embedding import Bridge, ModelRegistration
from mempipe.schemas.failure import Failure, FailureClass
from mempipe.schemas.identity import Visibility
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.run import RunRecord, RunStatus
from mempipe.schemas.search import CandidateQuery, Hit, Near, ReadFilter
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.snapshot import ExtractionState, ExtractionStatus
from mempipe.schemas.turn import Turn
from mempipe.schemas.work import ExtractionVersion, WorkQuery

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(hours=1)


from tests.stores import memory, promote, turn  # noqa: E402


@pytest.mark.repositories("turns", "work", "schema")
def test_two_users_may_reuse_a_session_id_and_are_never_merged(backend) -> None:
    maya = [turn(seq, "support-118", f"maya {seq}", user="maya") for seq in range(3)]
    bob = [turn(seq, "support-118", f"bob {seq}", user="bob") for seq in range(3)]
    assert backend.add_turns(maya, "r").inserted == 3
    result = backend.add_turns(bob, "r")
    assert (result.inserted, result.duplicates, result.conflicts) == (3, 0, [])
    again = backend.add_turns([*maya, *bob], "r")
    assert (again.inserted, again.duplicates, again.conflicts) == (0, 6, [])
    assert promote(backend) == 4, "each user's session cut on its own (two turns a snapshot)"
    assert backend.count_unpromoted_turns() == 0
    stats = backend.stats()
    assert (stats.turns, stats.sessions) == (6, 2)
    work = backend.extraction_work(WorkQuery(handlers=["semantic"]))
    seen = {
        item.user_id: {line.content for line in backend.snapshot_content(item.snapshot_id).turns}
        for item in work
        if backend.snapshot_content(item.snapshot_id).turns[0].content.endswith(" 0")
    }
    assert seen == {"maya": {"maya 0", "maya 1"}, "bob": {"bob 0", "bob 1"}}


@pytest.mark.repositories("turns", "work")
def test_snapshot_times_are_when_the_conversation_happened(backend) -> None:
    backend.add_turns([turn(seq) for seq in range(4)], "r")
    promote(backend)
    work = backend.extraction_work(WorkQuery(handlers=["semantic"]))
    ids = [item.snapshot_id for item in work]
    times = backend.snapshot_times([*ids, "no-such-snapshot"])
    assert sorted(times.values()) == [T0, T0 + timedelta(minutes=2)], "each one's first turn"
    assert set(times) == set(ids)


@pytest.mark.repositories("turns", "schema")
def test_turn_writes_are_idempotent_and_conflicts_are_returned(backend) -> None:
    first = backend.add_turns([turn(0), turn(1)], "r1")
    again = backend.add_turns([turn(0), turn(1, content="changed")], "r2")
    assert (first.inserted, first.duplicates) == (2, 0)
    assert (again.inserted, again.duplicates, len(again.conflicts)) == (0, 1, 1)
    assert backend.stats().turns == 2


@pytest.mark.repositories("turns")
def test_unpromoted_turns_come_in_key_order_and_promotion_is_final(backend) -> None:
    backend.add_turns([turn(1, "b"), turn(0, "b"), turn(0, "a"), turn(2, "a"), turn(1, "a")], "r")
    keys = [(t.session_id, t.turn_seq) for t in backend.iter_unpromoted_turns(page_size=2)]
    assert keys == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    assert backend.count_unpromoted_turns() == 5
    assert promote(backend) == 3
    assert backend.count_unpromoted_turns() == 0
    assert promote(backend) == 0


@pytest.mark.repositories("runs")
def test_spend_written_twice_adds_up_and_reads_back_by_run_and_day(backend) -> None:
    """Each task writes what it spent; the store adds each write to what it holds for the same
    run, day, kind, model, memory type and way."""
    row = SpendRow(
        run_id="r",
        day="2026-12-03",
        kind="extraction",
        model="gpt-4o-mini",
        memory_type="semantic",
        requests=2,
        input_tokens=300,
        output_tokens=40,
    )
    backend.add_spend([row, row.model_copy(update={"kind": "embedding", "memory_type": ""})])
    backend.add_spend([row.model_copy(update={"requests": 1, "unreported": 1})])
    backend.add_spend([row.model_copy(update={"run_id": "other", "day": "2026-12-04"})])
    [embedding, extraction] = backend.spend(run_id="r")
    assert (extraction.requests, extraction.input_tokens, extraction.unreported) == (3, 600, 1)
    assert (embedding.kind, embedding.requests, embedding.memory_type) == ("embedding", 2, "")
    assert [r.run_id for r in backend.spend(since="2026-12-04")] == ["other"]
    assert len(backend.spend(until="2026-12-03")) == 2


@pytest.mark.repositories("runs")
def test_runs_are_recorded_with_their_outcome(backend) -> None:
    backend.start_run(RunRecord(run_id="r", flow="backfill", parameters={"x": 1}, started_at=T0))
    backend.finish_run("r", RunStatus.FAILED, {"turns": 3}, "boom")
    run = backend.get_run("r")
    assert (run.status, run.counts, run.error, run.parameters) == (
        RunStatus.FAILED,
        {"turns": 3},
        "boom",
        {"x": 1},
    )
    assert backend.get_run("missing") is None


@pytest.mark.repositories("runs")
def test_a_crashed_run_leaves_a_checkpoint_to_resume_from(backend) -> None:
    backend.start_run(RunRecord(run_id="r1", flow="reembed", started_at=T0))
    backend.set_checkpoint("r1", "embed:semantic:all-MiniLM-L6-v2", 400)
    backend.set_checkpoint("r1", "embed:semantic:all-MiniLM-L6-v2", 800)
    backend.start_run(RunRecord(run_id="r2", flow="reembed", started_at=T0 + timedelta(hours=1)))
    assert backend.resume_point("reembed", "embed:semantic:all-MiniLM-L6-v2", "r2") == 800
    assert backend.resume_point("reembed", "embed:stm:all-MiniLM-L6-v2", "r2") is None
    backend.finish_run("r2", RunStatus.COMPLETED, {})
    backend.start_run(RunRecord(run_id="r3", flow="reembed", started_at=T0 + timedelta(hours=2)))
    assert backend.resume_point("reembed", "embed:semantic:all-MiniLM-L6-v2", "r3") is None, (
        "after a completed run there is nothing to resume"
    )


@pytest.mark.repositories("batches")
def test_provider_batches_are_found_open_by_scope_until_they_end(backend) -> None:
    def batch(key: str, scope: str, at: datetime) -> ProviderBatch:
        return ProviderBatch(
            key=key,
            run_id=key.split(":")[0],
            job="reembed",
            scope=scope,
            endpoint="/v1/embeddings",
            input_file_id=f"file-{key}",
            requests=2,
            items={"semantic-1-2": [1, 2], "semantic-3-3": [3]},
            created_at=at,
        )

    first, second = batch("r1:0", "reembed:semantic:m", T0), batch("r1:1", "reembed:semantic:m", T1)
    backend.record_batch(second)
    backend.record_batch(first)
    backend.record_batch(batch("r2:0", "reembed:stm:m", T0))
    assert [b.key for b in backend.open_batches("reembed", "reembed:semantic:m")] == [
        "r1:0",
        "r1:1",
    ], "oldest first, of this scope only"
    first.batch_id, first.status = "batch_1", BatchStatus.SUBMITTED
    backend.record_batch(first)
    second.status = BatchStatus.APPLIED
    backend.record_batch(second)
    [still] = backend.open_batches("reembed", "reembed:semantic:m")
    assert (still.key, still.batch_id, still.items) == ("r1:0", "batch_1", first.items)
    assert [b.status for b in backend.run_batches("r1")] == [
        BatchStatus.SUBMITTED,
        BatchStatus.APPLIED,
    ]
    assert backend.open_batches("replay", "reembed:semantic:m") == []


@pytest.mark.repositories("turns", "work", "audit")
def test_extraction_work_states_and_failures(backend) -> None:
    backend.add_turns([turn(0), turn(1), turn(2)], "r")
    promote(backend, handlers=("semantic",))
    work = backend.extraction_work(WorkQuery(handlers=["semantic", "taxonomic"]))
    assert len(work) == 4, "a handler enabled later gets pending states too"
    first = work[0]
    content = backend.snapshot_content(first.snapshot_id)
    assert [t.content for t in content.turns] == ["turn 0", "turn 1"]
    backend.set_extraction_state(
        first.snapshot_id,
        ExtractionState(
            handler=first.handler,
            status=ExtractionStatus.FAILED_CONTENT,
            attempts=1,
            last_error="x",
        ),
    )
    backend.add_failure(
        Failure(
            run_id="r",
            step="extract:semantic",
            failure_class=FailureClass.CONTENT,
            error_type="refusal",
            error="x",
            attempts=1,
            at=T0,
        )
    )
    assert len(backend.extraction_work(WorkQuery(handlers=["semantic", "taxonomic"]))) == 3
    assert (
        len(backend.extraction_work(WorkQuery(handlers=["semantic", "taxonomic"], force=True))) == 4
    )
    assert backend.failure_counts() == {"environmental": 0, "content": 1}
    narrowed = SnapshotSelection(snapshot_ids=[first.snapshot_id])
    assert {
        w.snapshot_id
        for w in backend.extraction_work(
            WorkQuery(handlers=["semantic"], selection=narrowed, force=True)
        )
    } == {first.snapshot_id}


def test_stale_work_is_what_ran_with_another_extractor_or_prompt(backend) -> None:
    backend.add_turns([turn(n) for n in range(6)], "r")
    promote(backend, handlers=("semantic",))
    first, second, third = backend.extraction_work(WorkQuery(handlers=["semantic"]))
    for item, prompt in ((first, "labels@aaa"), (second, "labels@bbb")):
        backend.set_extraction_state(
            item.snapshot_id,
            ExtractionState(
                handler="semantic",
                status=ExtractionStatus.DONE,
                attempts=1,
                extractor="openai:m",
                prompt_version=prompt,
            ),
        )

    def work(stale=None) -> set[str]:
        found = backend.extraction_work(WorkQuery(handlers=["semantic"], stale=stale))
        return {w.snapshot_id for w in found}

    assert work() == {third.snapshot_id}, "done is done without --stale"
    now = {"semantic": ExtractionVersion(extractor="openai:m", prompt_version="labels@bbb")}
    assert work(now) == {first.snapshot_id, third.snapshot_id}, "another prompt, and pending"
    other = {"semantic": ExtractionVersion(extractor="openai:n", prompt_version="labels@bbb")}
    assert work(other) == {first.snapshot_id, second.snapshot_id, third.snapshot_id}


@pytest.mark.repositories("runs", "leases")
def test_a_lease_belongs_to_one_running_run_and_ends_with_it(backend) -> None:
    hour = timedelta(hours=1)
    now = datetime.now(UTC)
    for run in ("a", "b", "c"):
        backend.start_run(RunRecord(run_id=run, flow="replay", started_at=now, heartbeat_at=now))
    assert backend.acquire_lease("owner-1", "a", hour) is None
    assert backend.acquire_lease("owner-1", "b", hour) == "a", "a holds it"
    assert backend.acquire_lease("owner-1", "a", hour) is None, "a again: its own"
    assert backend.acquire_lease("owner-2", "b", hour) is None, "another name is another lock"
    assert backend.lease_holders() == {"owner-1": "a", "owner-2": "b"}
    backend.release_leases("b", ["owner-2"])
    assert backend.acquire_lease("owner-2", "c", -hour) is None, "released: free"
    assert backend.acquire_lease("owner-2", "b", hour) is None, "c's lease ran out: free"
    backend.heartbeat("b", hour)
    assert backend.acquire_lease("owner-2", "c", hour) == "b", "renewed by b's heartbeat"
    backend.finish_run("a", RunStatus.FAILED, {}, "killed")
    assert "owner-1" not in backend.lease_holders(), "a run's leases end with it"
    assert backend.acquire_lease("owner-1", "c", hour) is None
    running = {r.run_id for r in backend.list_runs(running_only=True)}
    assert running == {"b", "c"}


@pytest.mark.repositories("runs", "leases")
def test_runs_record_where_they_run_and_their_heartbeat(backend) -> None:
    started = datetime(2024, 1, 1, tzinfo=UTC)
    backend.start_run(
        RunRecord(
            run_id="r",
            flow="replay",
            started_at=started,
            heartbeat_at=started,
            host="box",
            pid=4242,
            machine="boot/ns",
        )
    )
    backend.heartbeat("r", timedelta(minutes=1))
    run = backend.get_run("r")
    assert run is not None
    assert (run.host, run.pid, run.machine) == ("box", 4242, "boot/ns")
    assert run.heartbeat_at is not None
    assert run.heartbeat_at > started


@pytest.mark.repositories("memories")
def test_memories_versions_reinforcement_and_scoped_candidates(backend, searchable) -> None:
    model = "hashing-4"
    backend.ensure_vector_table("semantic", model, 4)
    with backend.write_transaction():
        backend.add_memory(
            "semantic",
            memory(
                "m1",
                "home airport JFK",
                "home_airport",
                has_embedding=True,
                embedding_model_id=model,
            ),
            [1.0, 0.0, 0.0, 0.0],
        )
        backend.add_memory(
            "semantic", memory("x1", "home airport OSL", "home_airport", user="other"), None
        )
    mine = scope_of("o", "p", "u", None, Visibility.PRIVATE)
    by_key = backend.memory_candidates(
        CandidateQuery(memory_type="semantic", scope=mine, key="home_airport", k=5)
    )
    assert [c.memory_id for c in by_key] == ["m1"], "another user's record is out of scope"
    searchable()
    by_vector = backend.memory_candidates(
        CandidateQuery(
            memory_type="semantic",
            scope=mine,
            near=Near(vector=[0.9, 0.1, 0.0, 0.0], model_id=model),
            k=5,
        )
    )
    assert [c.memory_id for c in by_vector] == ["m1"]
    assert by_vector[0].similarity > 0.9
    with backend.write_transaction():
        old_version = backend.supersede_memory("semantic", "m1")
        backend.add_memory(
            "semantic",
            memory(
                "m2",
                "home airport LIS",
                "home_airport",
                version=old_version + 1,
                supersedes_id="m1",
            ),
            None,
        )
        backend.reinforce_memory("semantic", "m2", "snap-1")
        backend.reinforce_memory("semantic", "m2", "snap-1")
    assert backend.get_memory("semantic", "m1")["status"] == "superseded"
    latest = backend.get_memory("semantic", "m2")
    assert (latest["version"], latest["supersedes_id"], latest["reinforcement_count"]) == (
        2,
        "m1",
        1,
    )


def write_then_crash(backend) -> None:
    with backend.write_transaction():
        backend.add_memory("semantic", memory("m1", "text", "label"), None)
        raise RuntimeError("crash")


@pytest.mark.repositories("memories")
def test_a_failed_write_transaction_leaves_nothing(backend) -> None:
    with pytest.raises(RuntimeError, match="crash"):
        write_then_crash(backend)
    assert backend.get_memory("semantic", "m1") is None


@pytest.mark.repositories("memories", "audit")
def test_a_rehearsal_sees_its_own_writes_and_leaves_the_store_as_it_was(backend) -> None:
    """What ``replay --preview`` stands on: the write transactions taken inside a rehearsal
    join it, later reads inside it see their writes, and its end undoes every one."""
    with backend.write_transaction():
        backend.add_memory("semantic", memory("m1", "kept", "label"), None)
    with backend.rehearsal():
        with backend.write_transaction():
            backend.supersede_memory("semantic", "m1")
            backend.add_memory("semantic", memory("m2", "rehearsed", "label"), None)
        with backend.write_transaction():
            backend.reinforce_memory("semantic", "m2", "snap-9")
            backend.add_audit([_audit_row("rehearsal")])
        assert backend.get_memory("semantic", "m2")["reinforcement_count"] == 1
        assert backend.get_memory("semantic", "m1")["status"] == "superseded"
        assert [r.run_id for r in backend.audit_rows(AuditSelection(run_id="rehearsal"))] == [
            "rehearsal"
        ]
    assert backend.get_memory("semantic", "m2") is None
    assert backend.get_memory("semantic", "m1")["status"] == "active"
    assert list(backend.audit_rows(AuditSelection(run_id="rehearsal"))) == []
    with backend.write_transaction():
        backend.add_memory("semantic", memory("m3", "after", "other"), None)
    assert backend.get_memory("semantic", "m3") is not None, "and writes commit again after it"


def _audit_row(run_id: str) -> AuditRow:
    return AuditRow(
        run_id=run_id,
        at=T0,
        day=T0.date(),
        org_id="o",
        project_id="p",
        memory_type="semantic",
        action=ReconcileAction.ADD,
        memory_id="m1",
        version=1,
        text="x",
    )


@pytest.mark.repositories("audit")
def test_the_audit_log_reads_back_by_run_and_day(backend) -> None:
    row = _audit_row("r")
    with backend.write_transaction():
        backend.add_audit([row, row.model_copy(update={"run_id": "r2"})])
    assert [r.run_id for r in backend.audit_rows(AuditSelection(run_id="r"))] == ["r"]
    assert (
        len(list(backend.audit_rows(AuditSelection(since="2024-01-01", until="2024-01-01")))) == 2
    )
    assert list(backend.audit_rows(AuditSelection(since="2024-01-02"))) == []


def _one_embedded_memory(backend) -> None:
    backend.ensure_vector_table("semantic", "hashing-4", 4)
    with backend.write_transaction():
        backend.add_memory(
            "semantic",
            memory("m1", "a", "a", has_embedding=True, embedding_model_id="hashing-4"),
            [1.0, 0, 0, 0],
        )


@pytest.mark.repositories("models", "vectors")
def test_blue_green_registry_switch_rollback_finalize(backend) -> None:
    _one_embedded_memory(backend)
    backend.register_model(
        ModelRegistration(
            collection="semantic", model_id="hashing-8", dimensions=8, state="building"
        )
    )
    missing = backend.records_missing_vectors("semantic", "hashing-8", 0, 10)
    assert len(missing) == 1
    assert backend.set_vectors("semantic", "hashing-8", [(missing[0][0], [1.0] + [0.0] * 7)]) == 1
    assert backend.set_vectors("semantic", "hashing-8", [(missing[0][0], [1.0] + [0.0] * 7)]) == 0
    assert backend.vector_counts("semantic", "hashing-8") == (1, 1)
    backend.switch_models(["semantic"], "hashing-8")
    assert backend.active_embedding("semantic") == ("hashing-8", 8)
    assert backend.get_memory("semantic", "m1")["embedding_model_id"] == "hashing-8"
    assert backend.rollback_models(["semantic"]) == ["semantic"]
    assert backend.active_embedding("semantic") == ("hashing-4", 4)


def _bridge(serving: str, query: str, seed: int = 0) -> Bridge:
    return Bridge(
        collection="semantic",
        serving_model=serving,
        query_model=query,
        sample=200,
        pairs=200,
        seed=seed,
        source_dims=8,
        target_dims=4,
        held_out_cosine=0.9,
        fitted_at=datetime(2026, 1, 2, tzinfo=UTC),
        weights=bytes(range(9 * 4 * 4)),
    )


@pytest.mark.repositories("bridges")
def test_a_bridge_is_kept_one_a_collection_with_its_bytes(backend) -> None:
    """No search needed: SecantusDB keeps bridges too."""
    assert backend.bridges() == []
    backend.keep_bridge(_bridge("hashing-4", "hashing-16"))
    backend.keep_bridge(_bridge("hashing-4", "hashing-8", seed=3))
    assert backend.bridges() == [_bridge("hashing-4", "hashing-8", seed=3)], "the last one kept"
    assert backend.bridges()[0].weights == bytes(range(144)), "the map's bytes as written"


@pytest.mark.repositories("models", "vectors")
def test_a_bridge_outlives_an_abandoned_move_and_the_switch_retires_it(backend) -> None:
    _one_embedded_memory(backend)
    backend.keep_bridge(_bridge("hashing-4", "hashing-8", seed=3))
    backend.register_model(
        ModelRegistration(
            collection="semantic", model_id="hashing-8", dimensions=8, state="building"
        )
    )
    ((rowid, _),) = backend.records_missing_vectors("semantic", "hashing-8", 0, 10)
    backend.set_vectors("semantic", "hashing-8", [(rowid, [1.0] + [0.0] * 7)])
    assert backend.rollback_models(["semantic"]) == ["semantic"]
    assert len(backend.bridges()) == 1, "a move abandoned: hashing-4 still serves, its bridge too"
    backend.register_model(
        ModelRegistration(
            collection="semantic", model_id="hashing-8", dimensions=8, state="building"
        )
    )
    ((rowid, _),) = backend.records_missing_vectors("semantic", "hashing-8", 0, 10)
    backend.set_vectors("semantic", "hashing-8", [(rowid, [1.0] + [0.0] * 7)])
    backend.switch_models(["semantic"], "hashing-8")
    assert backend.bridges() == [], "hashing-4 no longer serves: its bridge is retired"


@pytest.mark.repositories("turns", "models", "vectors")
def test_a_preview_draws_records_with_their_hit_text_and_serving_vector(backend) -> None:
    _one_embedded_memory(backend)
    backend.add_turns([turn(0, content="window seat"), turn(1)], "r")
    backend.register_model(
        ModelRegistration(collection="stm", model_id="hashing-4", dimensions=4, state="building")
    )
    (first, _) = backend.records_missing_vectors("stm", "hashing-4", 0, 10)
    backend.set_vectors("stm", "hashing-4", [(first[0], [0.0, 1.0, 0.0, 0.0])])

    turns = backend.record_refs("stm", 0, 10)
    assert [(hit_id, message_id) for _, hit_id, message_id in turns] == [
        ("s#0", None),
        ("s#1", None),
    ]
    assert backend.record_refs("stm", turns[0][0], 10) == turns[1:], "paged after an id"
    sampled = backend.sampled_records("stm", "hashing-4", [rowid for rowid, _, _ in turns])
    by_id = {r.hit.id: r for r in sampled}
    assert by_id["s#0"].vector == [0.0, 1.0, 0.0, 0.0]
    assert by_id["s#1"].vector is None, "no vector of the model: none"
    assert (by_id["s#0"].text, by_id["s#0"].hit.user_id, by_id["s#0"].searchable) == (
        "window seat",
        "u",
        True,
    )

    ((rowid, memory_id, _),) = backend.record_refs("semantic", 0, 10)
    (record,) = backend.sampled_records("semantic", "hashing-4", [rowid])
    assert (memory_id, record.hit.id, record.text) == ("m1", "m1", "a")
    assert record.vector == [1.0, 0.0, 0.0, 0.0]
    assert backend.sampled_records("semantic", None, [rowid])[0].vector is None


def _states(backend) -> dict[str, str]:
    return {e.model_id: e.state.value for e in backend.registry() if e.collection == "semantic"}


@pytest.mark.repositories("models", "vectors")
def test_a_switch_to_a_model_without_vectors_is_refused_and_changes_nothing(backend) -> None:
    _one_embedded_memory(backend)
    with pytest.raises(StoreError, match="no vectors of hashing-9 to switch to"):
        backend.switch_models(["semantic"], "hashing-9")
    assert _states(backend) == {"hashing-4": "serving"}


@pytest.mark.repositories("models", "vectors")
def test_no_move_drops_the_serving_model(backend) -> None:
    """The blue/green rules are one domain plan on both backends: after a finalize there is
    nothing to roll back to, and a rollback then leaves the serving model and its vectors."""
    _one_embedded_memory(backend)
    backend.register_model(
        ModelRegistration(
            collection="semantic", model_id="hashing-8", dimensions=8, state="building"
        )
    )
    backend.set_vectors(
        "semantic", "hashing-8", [(backend.record_id_bounds("semantic")[0], [1.0] * 8)]
    )
    backend.switch_models(["semantic"], "hashing-8")
    assert backend.finalize_models(["semantic"]) == ["semantic:hashing-4"]
    assert backend.rollback_models(["semantic"]) == []
    assert _states(backend) == {"hashing-8": "serving"}
    assert backend.vector_counts("semantic", "hashing-8") == (1, 1)


@pytest.mark.repositories("models", "vectors")
def test_a_rollback_of_a_move_that_never_switched_drops_only_the_building_vectors(backend) -> None:
    _one_embedded_memory(backend)
    backend.register_model(
        ModelRegistration(
            collection="semantic", model_id="hashing-8", dimensions=8, state="building"
        )
    )
    assert backend.rollback_models(["semantic"]) == ["semantic"]
    assert _states(backend) == {"hashing-4": "serving"}
    assert backend.vector_counts("semantic", "hashing-4") == (1, 1)


@pytest.mark.repositories("search", "memories")
def test_search_filters_are_anded_inside_the_query(backend, searchable) -> None:
    backend.ensure_vector_table("semantic", "hashing-4", 4)
    with backend.write_transaction():
        for n, user in enumerate(["u", "v"]):
            backend.add_memory(
                "semantic",
                memory(
                    f"m{n}",
                    f"refund policy {user}",
                    f"l{n}",
                    user=user,
                    has_embedding=True,
                    embedding_model_id="hashing-4",
                ),
                [1.0, 0.0, 0.0, float(n)],
            )
    searchable()
    text = backend.search_text("semantic", "refund", ReadFilter(user_id="v"), 5)
    vector = backend.search_vector(
        "semantic", Near(vector=[1.0, 0, 0, 0], model_id="hashing-4"), ReadFilter(user_id="v"), 1
    )
    assert [h.id for h in text] == ["m1"]
    assert [h.id for h in vector] == ["m1"]


@pytest.mark.repositories("schema")
def test_declarations_are_write_once(backend) -> None:
    backend.declare(["engagement_id"], [CustomTypeConfig(name="ticket")])
    assert backend.partition_keys == ("engagement_id",)
    assert backend.custom_types == ("ticket",)
    with pytest.raises(ConfigError):
        backend.declare([], [CustomTypeConfig(name="ticket")])


@pytest.mark.repositories("erasure", "turns", "work", "memories", "audit")
def test_an_erased_owner_is_written_by_no_work_that_began_before_the_erase(
    backend, monkeypatch
) -> None:
    """The erase fence on every backend: a trigger on SQLite, write-then-withdraw on MongoDB.
    Rows of the erased user written by earlier work go nowhere; other users' go in; work begun
    after the erase writes the user again."""
    from mempipe.adapters.store import writer_epoch
    from mempipe.schemas.bundle import BundleSelection

    monkeypatch.setattr(writer_epoch, "PROCESS_STARTED", datetime.now(UTC) - timedelta(hours=1))
    backend.erase_user(BundleSelection(user_id="gone"), dry_run=False)
    audit = AuditRow(
        run_id="r",
        at=T0,
        day=T0.date(),
        org_id="o",
        project_id="p",
        user_id="gone",
        memory_type="semantic",
        action=ReconcileAction.ADD,
        memory_id="m-gone",
        version=1,
        text="the erased user's words",
    )

    written = backend.add_turns([turn(0, user="gone"), turn(1, user="gone"), turn(0)], "late")
    snapshots = promote(backend)
    with backend.write_transaction():
        kept = backend.add_memory(
            "semantic", memory("m-gone", "home airport LIS", "home_airport", user="gone"), None
        )
        backend.add_audit([audit, audit.model_copy(update={"user_id": "u", "memory_id": "m"})])

    assert (written.inserted, written.erased) == (1, 2)
    assert snapshots == 1, "the other user's snapshot only"
    assert kept is False
    assert backend.get_memory("semantic", "m-gone") is None
    assert [r.user_id for r in backend.audit_rows(AuditSelection(run_id="r"))] == ["u"]
    assert backend.export_page("turns", BundleSelection(user_id="gone"), None, 10)[0] == []

    monkeypatch.setattr(writer_epoch, "PROCESS_STARTED", datetime.now(UTC) + timedelta(hours=1))
    again = backend.add_turns([turn(0, user="gone")], "new-import")
    assert again.inserted == 1, "a job begun after the erase is a new, explicit act"


@pytest.mark.repositories("erasure", "turns", "memories", "audit")
def test_the_users_a_store_holds_are_listed_with_their_counts_and_times(backend) -> None:
    """``mempipe users`` on every backend: each (org, project, user) with its turns and memory
    records, the earliest and latest record times; a selection narrows it; an erased user
    leaves the list and is named among the erased, once however often erased."""
    from mempipe.schemas.bundle import BundleSelection

    backend.add_turns([turn(0), turn(1), turn(0, session="t", user="v")], "r")
    with backend.write_transaction():
        backend.add_memory("semantic", memory("m1", "home airport LIS", "home_airport"), None)
    listed = backend.stored_users(BundleSelection())
    assert [(u.org_id, u.project_id, u.user_id, u.turns, u.memories) for u in listed] == [
        ("o", "p", "u", 2, 1),
        ("o", "p", "v", 1, 0),
    ]
    (u, v) = listed
    assert u.first_seen == T0, "the memory was written later than the first turn"
    assert u.last_seen is not None
    assert u.last_seen >= T0 + timedelta(minutes=1)
    assert (v.first_seen, v.last_seen) == (T0, T0)
    assert [x.user_id for x in backend.stored_users(BundleSelection(user_id="v"))] == ["v"]
    assert backend.stored_users(BundleSelection(org_id="elsewhere")) == []

    for _ in range(2):
        backend.erase_user(BundleSelection(user_id="v"), dry_run=False)
    assert [x.user_id for x in backend.stored_users(BundleSelection())] == ["u"]
    assert backend.erased_owners(BundleSelection()) == [BundleSelection(user_id="v")]
    assert backend.erased_owners(BundleSelection(user_id="u")) == []


def _dated(session: str, seq: int, day: int, user: str) -> Turn:
    return turn(seq, session, user=user).model_copy(
        update={"created_at": T0 + timedelta(days=day, minutes=seq)}
    )


def _version(memory_id: str, day: int, *, status: str = "active", **fields) -> SemanticMemory:
    user = fields.pop("user", "u")
    at = T0 + timedelta(days=day)
    label = memory_id.split("v")[0]
    made = memory(memory_id, f"fact {memory_id}", label, user=user, status=status, **fields)
    return made.model_copy(update={"created_at": at, "updated_at": at})


@pytest.mark.repositories("retention", "turns", "work", "memories", "audit")
def test_a_retention_policy_expires_and_forgets_the_same_records_on_every_backend(backend) -> None:
    """One scene, one policy, as of 2024-04-10, the counts worked out by hand: each backend's
    plan, forgetting and search filter agree with them (SQLite in SQL, MongoDB by the
    domain's rules)."""
    from mempipe.domain.retention import expiry_of
    from mempipe.schemas.retention import RetentionPolicy, RetentionRule

    backend.add_turns(
        [
            *(_dated("a", s, 0, "u") for s in (0, 1)),  # old, extracted: forgotten
            *(_dated("b", s, 90, "u") for s in (0, 1)),  # recent: kept
            *(_dated("c", s, 0, "u") for s in (0, 1)),  # old, not extracted: kept
            *(_dated("a", s, 0, "w") for s in (0, 1)),  # old, a pinned user's: kept
        ],
        "r",
    )
    assert promote(backend) == 4
    items = backend.extraction_work(WorkQuery(handlers=("semantic",)))
    sessions = {
        (backend.snapshot_content(i.snapshot_id).session_id, i.user_id): i.snapshot_id
        for i in items
    }
    for (session, _), snapshot in sessions.items():
        if session != "c":
            backend.set_extraction_state(
                snapshot, ExtractionState(handler="semantic", status=ExtractionStatus.DONE)
            )
    with backend.write_transaction():
        for memory_id, day, status, supersedes in [
            ("m6v1", 1, "superseded", None),
            ("m6v2", 2, "superseded", "m6v1"),
            ("m6v3", 99, "active", "m6v2"),  # newest: kept, one version kept (m6v1 goes)
            ("m1", 95, "active", None),  # kept
            ("m2", 90, "active", None),  # third: past the cap of 2
            ("m5v1", 5, "superseded", None),
            ("m5v2", 6, "superseded", "m5v1"),
            ("m5v3", 85, "active", "m5v2"),  # past the cap, with its two versions
            ("m3", 80, "active", None),  # pinned: kept, and not counted
            ("m4", 10, "active", None),  # older than 60 days
        ]:
            version = _version(memory_id, day, status=status, supersedes_id=supersedes)
            backend.add_memory("semantic", version, None)
        taught = _version("m7", 99, user="v", evidence=[sessions[("a", "u")]])
        backend.add_memory("semantic", taught, None)  # last confirmed on day 0: too old
    policy = RetentionPolicy(
        turns=RetentionRule(max_age="30d"),
        semantic=RetentionRule(max_age="60d", max_per_user=2),
        keep_versions=1,
        pinned_users=("w",),
        pinned_memories=("m3",),
    )
    expiry = expiry_of(policy, T0 + timedelta(days=100))
    expected = {
        ("u", "turns", "turns.max_age"): 2,
        ("u", "semantic", "semantic.max_per_user"): 4,
        ("u", "semantic", "semantic.max_age"): 1,
        ("u", "semantic", "keep_versions"): 1,
        ("v", "semantic", "semantic.max_age"): 1,
    }
    planned = {(c.user_id, c.collection, c.rule): c.records for c in backend.expired_counts(expiry)}
    assert planned == expected

    hits = [
        Hit(id=i, source="semantic", score=1.0, text="", org_id="o", project_id="p", user_id="u")
        for i in ("m1", "m2", "m3", "m4")
    ]
    assert backend.expired_among("semantic", hits, expiry) == {"m2", "m4"}

    forgot: dict[tuple, int] = {}
    for collection in ("turns", "semantic"):
        backend.queue_expired(expiry, collection)
        while counts := backend.forget_queued(collection, 3, "forget-run", T0):
            for c in counts:
                key = (c.user_id, c.collection, c.rule)
                forgot[key] = forgot.get(key, 0) + c.records
    assert forgot == expected
    kept = {
        m
        for m in ("m1", "m2", "m3", "m4", "m5v1", "m6v1", "m6v2", "m6v3", "m7")
        if backend.get_memory("semantic", m) is not None
    }
    assert kept == {"m1", "m3", "m6v2", "m6v3"}
    rows = list(backend.audit_rows(AuditSelection(run_id="forget-run")))
    assert len(rows) == sum(expected.values())
    assert {r.action for r in rows} == {ReconcileAction.FORGET}
    assert {r.text for r in rows} == {""}
    assert backend.forgotten_memories() == {
        ("semantic", m) for m in ("m2", "m4", "m5v1", "m5v2", "m5v3", "m6v1", "m7")
    }
    again = backend.extraction_work(WorkQuery(handlers=("semantic",), force=True))
    assert sessions[("a", "u")] not in {i.snapshot_id for i in again}, "its evidence is fenced"
    assert sessions[("b", "u")] in {i.snapshot_id for i in again}
    assert backend.expired_counts(expiry) == []
