"""True counts and names in every summary and bar (issue 38): a bar ends where the work got; a
re-embed whose provider stopped counts what it never sent; the memories the erase fence
dropped are not duplicates; replay and import embed with the model that serves the store, as
backfill's embedding does, and each names the model that embedded."""

from __future__ import annotations

import itertools
import json
import threading
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from mempipe import progress
from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork, unit_of_work
from mempipe.cli import cli
from mempipe.domain.failures import FailureKind, failure_error
from mempipe.errors import ConfigError, IncompleteRunError
from mempipe.flows.backfill import backfill_flow
from mempipe.flows.import_ import import_memories_flow
from mempipe.flows.reembed import reembed_flow
from mempipe.schemas.bundle import BundleSelection
from mempipe.schemas.memory_import import MemoryFormat
from mempipe.schemas.run import FileKind, RunRecord, RunStatus, WrittenFile
from tests.fakes.openai_server import Answer, embeddings, error, fake_openai
from tests.stores import IMPORT_DEFAULTS, import_context, imported

MEM0 = Path(__file__).parents[2] / "examples" / "mem0-get-all.json"


def write_turns(path: Path, count: int, content: str) -> Path:
    """``count`` one-turn sessions, ``content`` formatted with each session's number."""
    turns = (
        {
            "session_id": f"s{i}",
            "turn_seq": 0,
            "role": "user",
            "content": content.format(i),
            "created_at": "2024-01-01T00:00:00Z",
        }
        for i in range(count)
    )
    path.write_text("".join(json.dumps(turn) + "\n" for turn in turns))
    return path


class Sink:
    def __init__(self) -> None:
        self.values: list[float] = []

    def update(self, completed: float) -> None:
        self.values.append(completed)

    def close(self) -> None:
        return None


def test_a_bar_ends_where_the_work_got_not_at_its_total(monkeypatch) -> None:
    sink = Sink()
    monkeypatch.setattr(progress, "_factories", [lambda label, total, unit: sink])
    monkeypatch.setattr(progress, "_lock", threading.Lock())

    def stopped_at_768() -> None:
        with progress.track("embed stm", 2080, "records") as bar:
            bar.update(768)
            raise RuntimeError("the provider went away")

    with pytest.raises(RuntimeError):
        stopped_at_768()
    assert sink.values[-1] == 768
    with progress.track("promote", 60, "turns") as bar:
        bar.update(60)
    assert sink.values[-1] == 60


def test_memories_the_erase_fence_dropped_are_counted_as_such(store, tmp_path) -> None:
    """An import that began before an erase: the fence drops the erased user's memories, and
    the summary says so instead of calling them duplicates."""
    selection = BundleSelection(
        org_id=IMPORT_DEFAULTS.org_id, project_id=IMPORT_DEFAULTS.project_id, user_id="alice"
    )
    UnitOfWork(store).erasure.erase_user(selection, dry_run=False)

    summary = imported(store, MEM0, MemoryFormat.MEM0, tmp_path / "rejects.jsonl")

    assert summary.skipped_erased > 0
    assert summary.duplicates_skipped == 0
    assert summary.records_read == (
        summary.added
        + summary.reinforced
        + summary.updated
        + summary.duplicates_skipped
        + summary.skipped_erased
        + summary.rejected
    )


def test_a_provider_failure_in_an_import_is_counted_and_fails_the_run(store, tmp_path) -> None:
    class Down(HashingEmbedder):
        def embed(self, texts):
            raise failure_error(FailureKind.SERVER, "503 upstream")

    summary = imported(
        store,
        MEM0,
        MemoryFormat.MEM0,
        tmp_path / "rejects.jsonl",
        ctx=import_context(embedder=Down(64)),
    )
    assert summary.provider_failed == summary.without_vector > 0
    assert "503 upstream" in (summary.provider_error or "")


def test_replay_and_import_embed_with_the_serving_model_and_backfill_names_it(
    prefect_server, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "project-config.yaml").write_text(
        "memory:\n  extraction:\n    enabled: [semantic]\n  embedding:\n    model: hashing-64\n"
    )
    archive = write_turns(tmp_path / "a.jsonl", 5, "I prefer aisle seats on flight {}.")
    store = f"sqlite:///{tmp_path / 'm.db'}"
    config = str(tmp_path / "project-config.yaml")
    backfill_flow(paths=[str(archive)], store=store, config=config, user_id="ann", embed=True)
    import_memories_flow(paths=[str(MEM0)], format=MemoryFormat.MEM0, store=store, config=config)
    reembed_flow(model="hashing-32", store=store, config=config)

    summary = backfill_flow(
        paths=[str(archive)], store=store, config=config, user_id="bob", embed=True
    )
    assert summary.embedding_model == "hashing-32", "the model that embedded, not the config's"
    again = import_memories_flow(
        paths=[str(MEM0)], format=MemoryFormat.MEM0, store=store, config=config, user_id="zed"
    )
    assert again.without_vector == 0

    with unit_of_work(store) as uow:
        records, vectors = uow.vectors.vector_counts("semantic", "hashing-32")
    assert records == vectors > 0, "every memory has a vector of the serving model"


def test_a_reembed_stopped_by_its_provider_counts_what_it_never_sent_as_failed(
    prefect_server, tmp_path, monkeypatch
) -> None:
    """The provider answers the probe and two batches, then fails: the range stops, and the
    records it never sent are counted failed with those it sent, so the counts add up."""
    monkeypatch.chdir(tmp_path)
    archive = write_turns(tmp_path / "a.jsonl", 1000, "Turn {}: I prefer aisle seats.")
    store = f"sqlite:///{tmp_path / 'm.db'}"
    backfill_flow(paths=[str(archive)], store=store, user_id="ann")
    answered = itertools.count()

    def fails_after_three(body: dict) -> Answer:
        return embeddings(body, 16) if next(answered) < 3 else error(503, "overloaded")

    with fake_openai() as (fake, url):
        fake.responder = fails_after_three
        monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", url)
        monkeypatch.setenv("MEMPIPE_LLM_API_KEY", "sk-test")
        monkeypatch.setenv("MEMPIPE_RETRY_MAX_ATTEMPTS", "1")
        with pytest.raises(IncompleteRunError) as stopped:
            reembed_flow(
                model="openai:fake-embed:16", collections=["stm"], batch_size=100, store=store
            )
    (turns,) = stopped.value.summary.collections  # type: ignore[attr-defined]
    assert turns.embedded_now == 200
    assert turns.records == 1000
    assert turns.failed == turns.records - turns.vectors - turns.unembeddable == 800
    assert len(fake.requests) < 10, "the range stopped sending"


def test_runs_show_says_a_failed_run_counted_nothing_and_names_files_never_written(
    tmp_path,
) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    now = datetime.now(UTC)
    rejects = tmp_path / "mempipe-rejects" / "backfill-r1.jsonl"
    with closing(open_store(url, migrate=True)) as store:
        store.start_run(RunRecord(run_id="r1", flow="backfill", started_at=now, heartbeat_at=now))
        store.record_file(
            WrittenFile(path=str(rejects), kind=FileKind.REJECTS, run_id="r1", written_at=now)
        )
        store.finish_run("r1", RunStatus.FAILED, {}, "the disk is full")
    shown = CliRunner().invoke(cli, ["runs", "show", "r1", "--store", url])
    assert shown.exit_code == 0, shown.output
    assert "counts: none recorded (the run failed before it counted its work" in shown.output
    assert f"rejects: {rejects} (never written)" in shown.output
    document = json.loads(
        CliRunner().invoke(cli, ["runs", "show", "r1", "--store", url, "--json"]).stdout
    )
    assert document["never_written"] == [str(rejects)]


def test_a_fill_and_its_failure_name_the_model_that_serves_not_the_configured_one(
    prefect_server, tmp_path, monkeypatch
) -> None:
    """Issue 54: the store moved to a provider model, the configuration still naming the local
    one: an incremental re-embed fills with the serving model, and its failure line names it;
    a size asked of the configured model is refused naming it as such."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    store = f"sqlite:///{tmp_path / 'm.db'}"
    config = str(tmp_path / "project-config.yaml")
    backfill_flow(paths=[str(write_turns(tmp_path / "a.jsonl", 5, "aisle {}"))], store=store)
    with fake_openai() as (fake, url):
        monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", url)
        monkeypatch.setenv("MEMPIPE_LLM_API_KEY", "sk-test")
        monkeypatch.setenv("MEMPIPE_RETRY_MAX_ATTEMPTS", "1")
        fake.responder = lambda body: embeddings(body, 16)
        reembed_flow(model="openai:fake-embed:16", store=store, config=config)
        backfill_flow(
            paths=[str(write_turns(tmp_path / "b.jsonl", 5, "window {}"))],
            store=store,
            config=config,
        )
        fake.responder = lambda body: error(503, "overloaded")
        with pytest.raises(ConfigError) as failed:
            reembed_flow(incremental=True, store=store, config=config)
    said = str(failed.value)
    assert said.startswith("openai:fake-embed:16 cannot embed, so nothing was changed"), said
    assert "hashing-64" not in said
    refused = CliRunner().invoke(
        cli, ["reembed", "--dimensions", "8", "--store", store, "--config", config]
    )
    assert refused.exit_code == 1
    assert "hashing-64 (the configured model: name another with --model) gives 64" in refused.stderr
