"""The transfer role on every backend: each collection read back in pages as its models, every
record once whatever the page size, a user's selection holding only that user's records; runs
added verbatim and only once."""

from __future__ import annotations

from datetime import UTC, datetime

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.audit import AuditRow, ReconcileAction
from mempipe.schemas.bundle import BUNDLE_MODELS, BundleSelection
from mempipe.schemas.embedding import ModelRegistration
from mempipe.schemas.failure import Failure, FailureClass
from mempipe.schemas.run import RunRecord, RunStatus
from tests.stores import memory, promote, turn

AT = datetime(2024, 3, 1, 9, 30, 15, 250000, tzinfo=UTC)


def filled(backend) -> None:
    backend.add_turns([turn(n, "s", user=u) for u in ("ann", "bob") for n in range(5)], "r")
    promote(backend)
    snapshots = backend.export_page("snapshots", BundleSelection(user_id="ann"), None, 100)[0]
    with backend.write_transaction():
        for n, user in enumerate(("ann", "ann", "bob")):
            backend.add_memory("semantic", memory(f"m{n}", f"fact {n}", f"l{n}", user=user), None)
        backend.supersede_memory("semantic", "m0")
        backend.reinforce_memory("semantic", "m1", snapshots[0].snapshot_id)
        backend.add_audit(
            [
                AuditRow(
                    run_id="r",
                    at=AT,
                    day=AT.date(),
                    org_id="o",
                    project_id="p",
                    user_id=user,
                    memory_type="semantic",
                    action=ReconcileAction.ADD,
                    memory_id=f"m{n}",
                    version=1,
                    text=f"fact {n}",
                )
                for n, user in enumerate(("ann", "ann", "bob"))
            ]
        )
        backend.add_failure(
            Failure(
                run_id="r",
                step="extract:semantic",
                failure_class=FailureClass.CONTENT,
                error_type="schema",
                error="not JSON",
                attempts=1,
                org_id="o",
                project_id="p",
                snapshot_id=snapshots[0].snapshot_id,
                at=AT,
            )
        )
    backend.add_runs([RunRecord(run_id="r", flow="replay", started_at=AT)])


def everything(backend, collection: str, selection: BundleSelection, page: int) -> list:
    records, after = [], None
    while True:
        batch, after = backend.export_page(collection, selection, after, page)
        records += batch
        if len(batch) < page:
            return records


def test_every_record_comes_once_as_its_model_whatever_the_page_size(backend) -> None:
    filled(backend)
    for collection, model in BUNDLE_MODELS.items():
        whole = everything(backend, collection, BundleSelection(), 1000)
        paged = everything(backend, collection, BundleSelection(), 2)
        assert all(isinstance(r, model) for r in whole), collection
        assert [r.model_dump_json() for r in paged] == [r.model_dump_json() for r in whole]
    counts = {c: len(everything(backend, c, BundleSelection(), 100)) for c in BUNDLE_MODELS}
    assert counts == {
        "runs": 1,
        "turns": 10,
        "snapshots": 6,
        "semantic": 3,
        "episodic": 0,
        "procedural": 0,
        "taxonomic": 0,
        "custom": 0,
        "audit": 3,
        "failures": 1,
    }
    (superseded,) = [
        r for r in everything(backend, "semantic", BundleSelection(), 9) if r.id == "m0"
    ]
    assert superseded.status.value == "superseded"
    (reinforced,) = [
        r for r in everything(backend, "semantic", BundleSelection(), 9) if r.id == "m1"
    ]
    assert (reinforced.reinforcement_count, len(reinforced.evidence)) == (1, 1)


def test_a_users_selection_holds_that_users_records_only(backend) -> None:
    filled(backend)
    ann = BundleSelection(user_id="ann")
    assert {t.user_id for t in everything(backend, "turns", ann, 100)} == {"ann"}
    assert {m.id for m in everything(backend, "semantic", ann, 100)} == {"m0", "m1"}
    assert {a.memory_id for a in everything(backend, "audit", ann, 100)} == {"m0", "m1"}
    assert len(everything(backend, "failures", ann, 100)) == 1, "it names ann's snapshot"
    assert everything(backend, "failures", BundleSelection(user_id="bob"), 100) == []
    assert [r.run_id for r in everything(backend, "runs", ann, 100)] == ["r"]


def test_runs_are_added_verbatim_and_once(backend) -> None:
    run = RunRecord(
        run_id="old",
        flow="backfill",
        status=RunStatus.COMPLETED,
        counts={"turns_inserted": 7},
        started_at=AT,
        finished_at=AT,
        host="h",
        pid=12,
    )
    assert backend.add_runs([run]) == {"old"}
    assert backend.add_runs([run.model_copy(update={"flow": "changed"})]) == set()
    assert backend.get_run("old") == run


def test_vectors_are_read_by_reference_and_found_again_by_it(backend) -> None:
    from mempipe.adapters.embedding.hashing import HashingEmbedder
    from mempipe.domain.ids import turn_ref
    from mempipe.services.reembed.fill import embed_collection

    filled(backend)
    embedder = HashingEmbedder(8)
    for collection in ("stm", "semantic"):
        embed_collection(
            UnitOfWork(backend), collection, embedder, run_id="r", batch_size=4, state="serving"
        )
    turns = everything(backend, "turns", BundleSelection(), 100)
    pages, after = [], None
    while True:
        page, after = backend.export_vectors(
            "turns", embedder.model_id, BundleSelection(), after, 3
        )
        pages += page
        if after is None:
            break
    refs = [ref for ref, _ in pages]
    assert sorted(refs) == sorted(
        turn_ref(t.org_id, t.project_id, t.user_id, t.session_id, t.turn_seq) for t in turns
    )
    assert all(len(vector) == 8 for _, vector in pages)
    assert set(backend.record_rowids("turns", [*refs, "o\x1fp\x1fnobody\x1fs\x1f0"])) == set(refs)
    ann = BundleSelection(user_id="ann")
    semantic, _ = backend.export_vectors("semantic", embedder.model_id, ann, None, 100)
    assert sorted(ref for ref, _ in semantic) == ["m0", "m1"]
    assert set(backend.record_rowids("semantic", ["m0", "m1", "zz"])) == {"m0", "m1"}


def test_turn_values_read_back_exactly_as_written(backend) -> None:
    """The SQLite store writes a batch of turns as one JSON document: text that JSON escapes
    (NUL, quotes, backslashes, line separators, emoji), 64-bit numbers, nested metadata and
    tool calls, and missing values must come back as the model held them."""
    tricky = [
        turn(0, content='NUL \x00 "quoted" back\\slash \u2028 line \U0001f600 é'),
        turn(1, content="far seq").model_copy(
            update={
                "turn_seq": 2**62,
                "name": "Ann O'Hara",
                "model": "gpt-4o",
                "metadata": {"nested": {"list": [1, 2.5, None, "x"]}, "flag": True},
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
                "tool_call_id": "c0",
                "message_id": "m-1",
                "agent_id": "agent",
                "created_at": None,
                "source": turn(0).source.model_copy(update={"line": None, "index": 7}),
            }
        ),
    ]
    assert backend.add_turns(tricky, "r").inserted == 2
    stored, _ = backend.export_page("turns", BundleSelection(), None, 10)
    by_seq = {t.turn_seq: t for t in stored}
    for written in tricky:
        assert by_seq[written.turn_seq].model_dump(exclude={"snapshot_id"}) == written.model_dump(
            exclude={"snapshot_id"}
        )


def test_a_models_options_are_recorded_with_it_and_travel_with_its_vectors(backend) -> None:
    """Recorded once, with the model; a copy or a bundle's target that takes the model over
    records them too, so it is searched as the source was embedded."""
    from mempipe.schemas.embedding import ModelOptions, SideOptions
    from mempipe.services.bundle_vectors import reusable

    asked = ModelOptions(
        query=SideOptions(fields={"input_type": "query"}),
        document=SideOptions(fields={"input_type": "document"}),
        dimensions_parameter="output_dimension",
    )
    model = "openai:voyage-3.5:8"
    backend.register_model(
        ModelRegistration(
            collection="semantic", model_id=model, dimensions=8, state="serving", options=asked
        )
    )
    backend.register_model(
        ModelRegistration(
            collection="semantic",
            model_id=model,
            dimensions=8,
            state="serving",
            options=ModelOptions(),
        )
    )
    backend.register_model(
        ModelRegistration(collection="stm", model_id="hashing-8", dimensions=8, state="serving")
    )
    recorded = {e.model_id: e.options for e in backend.registry()}
    assert recorded == {model: asked, "hashing-8": None}

    source = next(e for e in backend.registry() if e.model_id == model)
    moved = source.model_copy(update={"collection": "episodic"})
    assert reusable(UnitOfWork(backend), "episodic", moved)
    taken = {e.collection: e.options for e in backend.registry() if e.model_id == model}
    assert taken == {"semantic": asked, "episodic": asked}
