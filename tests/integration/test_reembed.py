"""Re-embedding a store of a few thousand memories to a model of another dimension: search
answers throughout, every record ends with a new vector, rollback restores the old, a crash
resumes to the same end state, mismatches are refused, the recall gate holds a bad model back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.errors import StoreError
from mempipe.schemas.embedding import ModelRegistration
from mempipe.schemas.evaluation import EvalQuery, QueryFile
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.run import RunRecord
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.evaluation import evaluate
from mempipe.services.reembed.fill import embed_collection, recall_gate
from mempipe.services.search import search


class Blind(HashingEmbedder):
    """A useless model: the same vector for every text."""

    def __init__(self) -> None:
        super().__init__(16)
        self.model_id = "blind-16"

    def embed(self, texts):
        return [[1.0] + [0.0] * 15 for _ in texts]


OLD, NEW, BLIND = HashingEmbedder(64), HashingEmbedder(128), Blind()
MODELS = {m.model_id: m for m in (OLD, NEW, BLIND)}
NOW = datetime(2024, 1, 1, tzinfo=UTC)
TOPICS = ["airport", "seat", "refund", "passport", "hotel", "train", "visa", "luggage"]
COUNT = 2000


def text(n: int) -> str:
    return f"user {n % 50} note {n} about the {TOPICS[n % len(TOPICS)]} {TOPICS[(n * 7) % 8]}"


@pytest.fixture
def big(store):
    store.ensure_vector_table("semantic", OLD.model_id, OLD.dimensions)
    records = [
        SemanticMemory(
            id=f"m{n}",
            org_id="o",
            project_id="p",
            user_id=f"u{n % 50}",
            text=text(n),
            label=f"fact_{n}",
            has_embedding=True,
            embedding_model_id=OLD.model_id,
            created_at=NOW,
            updated_at=NOW,
        )
        for n in range(COUNT)
    ]
    vectors = OLD.embed([r.text for r in records])
    with store.write_transaction():
        for record, vector in zip(records, vectors, strict=True):
            store.add_memory("semantic", record, vector)
    return store


def hits(store, query="refund passport", **filters):
    result = search(
        UnitOfWork(store),
        MODELS.__getitem__,
        query,
        "semantic",
        SearchMode.SEMANTIC,
        ReadFilter(**filters),
        5,
    )
    return [h.id for h in result.hits]


class Watching(HashingEmbedder):
    """The new model, checking after each batch that search still answers (with the old)."""

    def __init__(self, store) -> None:
        super().__init__(128)
        self.store, self.answers = store, []

    def embed(self, texts):
        self.answers.append(len(hits(self.store)))
        return super().embed(texts)


def test_a_move_to_another_dimension_keeps_search_answering_and_ends_complete(big) -> None:
    watcher = Watching(big)
    report = embed_collection(UnitOfWork(big), "semantic", watcher, run_id="r", batch_size=300)
    assert (report.records, report.vectors, report.embedded_now) == (COUNT, COUNT, COUNT)
    assert len(watcher.answers) == 7
    assert all(n == 5 for n in watcher.answers)
    assert big.active_embedding("semantic") == (OLD.model_id, 64), "nothing switched yet"
    big.switch_models(["semantic"], NEW.model_id)
    assert big.active_embedding("semantic") == (NEW.model_id, 128)
    stamped = big._conn.execute(
        "SELECT count(*) FROM memories_semantic WHERE has_embedding = 1 AND embedding_model_id = ?",
        (NEW.model_id,),
    ).fetchall()[0][0]
    assert stamped == COUNT
    assert len(hits(big)) == 5


def test_rollback_restores_the_old_model_and_finalize_drops_it(big) -> None:
    embed_collection(UnitOfWork(big), "semantic", NEW, run_id="r", batch_size=500)
    big.switch_models(["semantic"], NEW.model_id)
    assert big.rollback_models(["semantic"]) == ["semantic"]
    assert big.active_embedding("semantic") == (OLD.model_id, 64)
    assert {e.model_id for e in big.registry()} == {OLD.model_id}
    assert len(hits(big)) == 5
    embed_collection(UnitOfWork(big), "semantic", NEW, run_id="r2", batch_size=500)
    big.switch_models(["semantic"], NEW.model_id)
    assert big.finalize_models(["semantic"]) == [f"semantic:{OLD.model_id}"]
    assert big.rollback_models(["semantic"]) == []
    tables = big._conn.execute(
        "SELECT name FROM sqlite_master WHERE name LIKE 'vec_semantic__%' "
        "AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    ).fetchall()
    assert tables == [("vec_semantic__hashing_128",)]


def test_a_crashed_move_resumes_to_exactly_one_new_vector_per_record(big) -> None:
    class Crashes(HashingEmbedder):
        calls = 0

        def embed(self, texts):
            Crashes.calls += 1
            if Crashes.calls == 3:
                raise KeyboardInterrupt("killed")
            return super().embed(texts)

    big.start_run(RunRecord(run_id="r", flow="reembed", started_at=NOW))
    with pytest.raises(KeyboardInterrupt):
        embed_collection(UnitOfWork(big), "semantic", Crashes(128), run_id="r", batch_size=400)
    partial = big.vector_counts("semantic", NEW.model_id)[1]
    assert partial == 800
    big.start_run(RunRecord(run_id="r2", flow="reembed", started_at=NOW + timedelta(hours=1)))
    report = embed_collection(UnitOfWork(big), "semantic", NEW, run_id="r2", batch_size=400)
    assert (report.vectors, report.embedded_now) == (COUNT, COUNT - 800)
    assert report.resumed_after == 800, "it started after the crashed run's checkpoint"
    duplicates = big._conn.execute(
        "SELECT count(*) - count(DISTINCT memory_rowid) FROM vec_semantic__hashing_128"
    ).fetchall()[0][0]
    assert duplicates == 0


def test_writes_and_queries_of_another_model_or_dimension_are_refused(big) -> None:
    with pytest.raises(StoreError, match=r"indexed with hashing-64 \(64 dimensions\).*hashing-128"):
        big.ensure_vector_table("semantic", NEW.model_id, NEW.dimensions)
    with pytest.raises(StoreError, match="registered with 64 dimensions, not 32"):
        big.register_model(
            ModelRegistration(
                collection="semantic", model_id=OLD.model_id, dimensions=32, state="building"
            )
        )


def test_the_recall_gate_compares_old_and_new_on_labelled_queries(big) -> None:
    queries = QueryFile(
        queries=[EvalQuery(query=text(n), relevant_ids=[f"m{n}"]) for n in range(0, 400, 40)]
    )
    embed_collection(UnitOfWork(big), "semantic", BLIND, run_id="r", batch_size=1000)
    embed_collection(UnitOfWork(big), "semantic", NEW, run_id="r", batch_size=1000)
    worse = recall_gate(UnitOfWork(big), MODELS.__getitem__, queries, BLIND.model_id, min_ratio=0.9)
    better = recall_gate(UnitOfWork(big), MODELS.__getitem__, queries, NEW.model_id, min_ratio=0.9)
    assert worse is not None
    assert better is not None
    assert worse.old_recall == 1.0
    assert not worse.passed
    assert worse.ratio < 0.9
    assert better.passed
    assert better.new_recall == 1.0


def test_evaluation_embeds_its_queries_in_batches_and_finds_the_same(big) -> None:
    """One model call per batch of queries, not one per query; recall as per-query search."""
    queries = [EvalQuery(query=text(n), relevant_ids=[f"m{n}"]) for n in range(0, 2000, 7)]
    labelled = QueryFile(queries=queries)
    calls: list[int] = []

    class Counting(HashingEmbedder):
        def embed_query(self, texts):
            calls.append(len(texts))
            return OLD.embed_query(texts)

    batched = evaluate(
        UnitOfWork(big),
        lambda _: Counting(OLD.dimensions),
        labelled,
        "semantic",
        SearchMode.SEMANTIC,
        [5],
    ).result
    per_query = [
        search(
            UnitOfWork(big),
            MODELS.__getitem__,
            q.query,
            "semantic",
            SearchMode.SEMANTIC,
            ReadFilter(),
            5,
        )
        for q in queries
    ]

    assert calls == [256, len(queries) - 256]
    assert batched.recall == sum(
        f"m{n}" in {h.id for h in r.hits} for n, r in zip(range(0, 2000, 7), per_query, strict=True)
    ) / len(queries)
    assert batched.recall > 0.5


def test_incremental_fills_what_the_serving_model_lacks_turns_included(
    store, fixtures, defaults, tmp_path
) -> None:
    from tests.helpers import ingest

    ingest(store, fixtures / "turns.jsonl", defaults, tmp_path / "r.jsonl")
    report = embed_collection(
        UnitOfWork(store), "stm", OLD, run_id="r", batch_size=2, state="serving"
    )
    assert (report.records, report.vectors) == (4, 4)
    found = search(
        UnitOfWork(store),
        MODELS.__getitem__,
        "recovery time objective",
        "stm",
        SearchMode.SEMANTIC,
        ReadFilter(),
        1,
    )
    assert [h.message_id for h in found.hits] == ["m-4"]
    assert json.loads(found.model_dump_json())["mode"] == "semantic"


def test_the_recall_gate_measures_turns_with_queries_labelled_by_turns(
    store, fixtures, defaults, tmp_path
) -> None:
    """``--gate-source stm``: the gate searches the collection the queries' ids are in; on the
    memory collections these turn-labelled queries would find nothing for either model."""
    from tests.helpers import ingest

    ingest(store, fixtures / "turns.jsonl", defaults, tmp_path / "r.jsonl")
    for model, state in ((OLD, "serving"), (BLIND, "building")):
        embed_collection(UnitOfWork(store), "stm", model, run_id="r", batch_size=4, state=state)
    queries = QueryFile(queries=[EvalQuery(query="recovery time objective", relevant_ids=["m-4"])])
    gate = recall_gate(
        UnitOfWork(store), MODELS.__getitem__, queries, BLIND.model_id, 0.9, k=1, source="stm"
    )
    assert gate is not None
    assert (gate.old_recall, gate.passed) == (1.0, False)
    assert recall_gate(UnitOfWork(store), MODELS.__getitem__, queries, BLIND.model_id, 0.9) is None


def test_a_gate_on_a_collection_the_move_leaves_alone_is_refused_before_any_work(
    tmp_path, monkeypatch
) -> None:
    from click.testing import CliRunner

    from mempipe.cli import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "queries.jsonl").write_text('{"query": "seat", "relevant_ids": ["m-1"]}\n')
    runner = CliRunner()
    assert runner.invoke(cli, ["init", "--store", "sqlite:///m.db"]).exit_code == 0
    refused = runner.invoke(
        cli,
        [
            "reembed",
            "--model",
            "hashing-32",
            "--collections",
            "semantic",
            "--gate",
            "queries.jsonl",
            "--gate-source",
            "stm",
            "--store",
            "sqlite:///m.db",
        ],
    )
    assert refused.exit_code == 1
    assert "--gate-source stm is not among the collections this re-embed moves" in refused.stderr


def test_a_gate_on_a_move_of_one_collection_searches_that_collection(
    fixtures, tmp_path, prefect_server
) -> None:
    """``reembed --collections stm --gate Q``, no ``--gate-source``: the gate measures the turns
    it moves (before, it defaulted to the semantic memories and was refused); the labelled
    turn is found by the old model and by the new."""
    from tests.helpers import invoke

    store = "sqlite:///m.db"
    (tmp_path / "queries.jsonl").write_text(
        '{"query": "recovery time objective", "relevant_ids": ["m-4"]}\n'
    )
    invoke("backfill", str(fixtures / "turns.jsonl"), "--store", store, cwd=tmp_path)
    first = ("reembed", "--model", "hashing-32", "--collections", "stm", "--store", store)
    assert invoke(*first, cwd=tmp_path).exit_code == 0
    moved = invoke(
        *("reembed", "--model", "hashing-64", "--collections", "stm", "--store", store),
        *("--gate", "queries.jsonl", "--json"),
        cwd=tmp_path,
    )
    assert moved.exit_code == 0, moved.stderr
    summary = json.loads(moved.stdout)
    assert (summary["gate"]["old_recall"], summary["gate"]["new_recall"]) == (1.0, 1.0)
    assert summary["switched"] is True


def test_a_reembed_to_an_unreachable_model_changes_nothing_and_names_the_cause(
    fixtures, tmp_path, prefect_server
) -> None:
    """A provider model whose endpoint answers nothing: the move is refused before it starts,
    the models served and what search finds are as they were."""
    from tests.helpers import invoke
    from tests.processes import free_port

    args = ["--store", "sqlite:///m.db"]
    invoke("backfill", str(fixtures / "turns.jsonl"), *args, cwd=tmp_path)
    assert invoke("reembed", "--incremental", *args, cwd=tmp_path).exit_code == 0
    models_before = invoke("models", *args, "--json", cwd=tmp_path).stdout
    query = ["search", "recovery time", "--source", "stm", "--mode", "semantic", *args, "--json"]
    search_before = invoke(*query, cwd=tmp_path).stdout
    assert json.loads(search_before)["hits"], "search found the turns before"

    refused = invoke(
        *("reembed", "--model", "openai:text-embedding-3-small", *args, "--json"),
        cwd=tmp_path,
        env={
            "MEMPIPE_LLM_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",
            "OPENAI_API_KEY": "test",
        },
    )

    assert refused.exit_code == 1
    document = json.loads(refused.stdout)
    assert "refused" in document["error"].lower(), document
    assert invoke("models", *args, "--json", cwd=tmp_path).stdout == models_before
    assert invoke(*query, cwd=tmp_path).stdout == search_before
