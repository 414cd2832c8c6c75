"""A backfill stopped while it embeds, a memory import stopped part way, a backfill of many small
files killed with SIGKILL, and a replay stopped while it summarises sessions: each stopped by a
real signal to a real process, then run again to the end state of an uninterrupted run."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import apsw
import pytest

from tests.fakes.openai_server import embeddings, fake_openai
from tests.helpers import (
    MONTHS,
    invoke,
    read,
    vectors_of,
    write_archive,
    write_config,
    write_named_archive,
)
from tests.processes import environment, kill_when, start, stop_when

pytestmark = pytest.mark.prefect
SLOW_MODEL = "openai:fake-embed:32"


def embedded_yet(db: Path) -> bool:
    try:
        return vectors_of(db, SLOW_MODEL) > 0
    except apsw.Error:  # the file is there before its tables are
        return False


@pytest.mark.process("a real SIGTERM")
def test_sigterm_stops_a_backfill_while_it_embeds_and_a_rerun_completes(
    prefect_server, tmp_path
) -> None:
    write_archive(tmp_path / "archive.jsonl", 100)
    config = write_config(tmp_path, model=SLOW_MODEL)
    db = tmp_path / "memory.db"
    args = ["backfill", "archive.jsonl", "--embed", "--store", f"sqlite:///{db}"]
    args += ["--config", str(config), "--json"]
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 32, delay=0.5)
        provider = {"MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        victim = start(args, tmp_path, environment(prefect_server, **provider))
        took = stop_when(victim, lambda: embedded_yet(db), signal.SIGTERM)
        out, _ = victim.communicate()

        assert took < 10, f"took {took:.1f} s to stop"
        assert victim.returncode == 143, out
        document = json.loads(out)
        assert document["kind"] == "interrupted"
        assert document["turns_inserted"] == 100 * MONTHS * 2, "the summary is the backfill's"
        statuses = dict(read(db, "SELECT flow, status FROM runs"))
        assert statuses == {"backfill": "interrupted", "reembed": "interrupted"}
        assert vectors_of(db, SLOW_MODEL) < 100 * MONTHS * 2

        fake.responder = lambda body: embeddings(body, 32)
        rerun = invoke(*args, cwd=tmp_path, env=provider)
    assert rerun.exit_code == 0, rerun.output
    assert json.loads(rerun.stdout)["duplicates_skipped"] == 100 * MONTHS * 2
    assert vectors_of(db, SLOW_MODEL) == 100 * MONTHS * 2


@pytest.mark.process("a real SIGTERM")
def test_sigterm_stops_a_memory_import_and_a_rerun_imports_the_rest(
    prefect_server, tmp_path
) -> None:
    records = 1_500
    (tmp_path / "mem0.json").write_text(
        json.dumps(
            {
                "results": [
                    {
                        "id": f"m{i}",
                        "memory": f"Fact number {i} about trip {i * 7}.",
                        "user_id": f"user{i % 30:03d}",
                    }
                    for i in range(records)
                ]
            }
        )
    )
    config = write_config(tmp_path, model="openai:fake-embed:16")
    db = tmp_path / "memory.db"
    args = ["import", "mem0.json", "--format", "mem0", "--store", f"sqlite:///{db}"]
    args += ["--config", str(config), "--json"]

    def imported(store: Path = db) -> int:
        try:
            return read(store, "SELECT count(*) FROM memories_semantic")[0][0]
        except apsw.Error:  # the file is there before its tables are
            return 0

    def end_state(store: Path) -> set[tuple]:
        return set(
            read(store, "SELECT id, status, reinforcement_count, evidence FROM memories_semantic")
        )

    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 16, delay=1.0)
        provider = {"MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        victim = start(args, tmp_path, environment(prefect_server, **provider))
        took = stop_when(victim, lambda: db.exists() and imported() > 0, signal.SIGTERM)
        out, _ = victim.communicate()

        assert took < 10, f"took {took:.1f} s to stop"
        assert victim.returncode == 143, out
        assert json.loads(out)["kind"] == "interrupted"
        assert read(db, "SELECT status FROM runs WHERE flow = 'import-memories'") == [
            ("interrupted",)
        ]
        assert 0 < imported() < records

        fake.responder = lambda body: embeddings(body, 16)
        rerun = invoke(*args, cwd=tmp_path, env=provider)
        whole = tmp_path / "uninterrupted.db"
        reference = invoke(*args[:5], f"sqlite:///{whole}", *args[6:], cwd=tmp_path, env=provider)
    assert rerun.exit_code == 0, rerun.output
    assert reference.exit_code == 0, reference.output
    assert end_state(db) == end_state(whole), "as if it had never been stopped"


def turn_count(db: Path) -> int:
    try:
        return read(db, "SELECT count(*) FROM turns")[0][0]
    except apsw.Error:  # the file is there before its tables are
        return 0


@pytest.mark.timeout(600)  # thousands of files, read twice, beside another test's processes
@pytest.mark.process("a backfill killed with SIGKILL")
def test_a_backfill_of_many_small_files_killed_and_rerun_ends_as_an_uninterrupted_one(
    prefect_server, tmp_path
) -> None:
    """The files of a directory are read as one stream in few tasks: a kill -9 part way loses
    nothing committed, and the rerun adds exactly the rest, each file accounted on its own."""
    folder, files = tmp_path / "archive", 3000
    folder.mkdir()
    for n in range(files):
        turns = [
            {"session_id": f"s{n}", "turn_seq": 0, "role": "user", "content": f"note {n}"},
            {"session_id": f"s{n}", "turn_seq": 1, "role": "assistant", "content": "noted"},
        ]
        (folder / f"c{n:05d}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    (folder / "c00007.jsonl").write_text('{"session_id": "s7", "role": "robot"}\n')
    env = environment(prefect_server)
    killed, whole = tmp_path / "killed.db", tmp_path / "whole.db"

    victim = start(["backfill", "archive", "--store", f"sqlite:///{killed}"], tmp_path, env)
    kill_when(victim, lambda: turn_count(killed) >= 1000)
    kept = turn_count(killed)
    assert kept < 2 * files, "killed part way"

    rerun = invoke("backfill", "archive", "--store", f"sqlite:///{killed}", "--json", cwd=tmp_path)
    assert rerun.exit_code == 0, rerun.output
    again = json.loads(rerun.stdout)
    assert again["files_read"] == files
    assert again["turns_inserted"] + again["duplicates_skipped"] == 2 * (files - 1)
    assert again["duplicates_skipped"] == kept, "what the killed run committed is kept"
    assert again["rejected"] == 1
    (bad,) = [f for f in again["files"] if f["rejected"]]
    assert bad["path"].endswith("c00007.jsonl")

    done = invoke("backfill", "archive", "--store", f"sqlite:///{whole}", cwd=tmp_path)
    assert done.exit_code == 0, done.output
    snapshot = "SELECT session_id, turn_seq, role, content, snapshot_id IS NOT NULL FROM turns"
    assert sorted(read(killed, snapshot)) == sorted(read(whole, snapshot))


@pytest.mark.process("a real SIGTERM")
def test_sigterm_stops_a_replay_while_it_summarizes_sessions_and_says_what_is_pending(
    prefect_server, tmp_path
) -> None:
    """A real process and a real signal (issue 54): a provider that takes its time over each
    session's summary, SIGTERM once a few are summarized. The replay asks for no more, exits 143
    within 10 s, counts the summaries it made, and names the extractions still pending, in its
    JSON document and in the run's record; a rerun does them."""
    from tests.fakes.openai_server import completion, memories

    write_named_archive(tmp_path / "archive.jsonl", 60)
    config = write_config(tmp_path)
    args = ["--store", f"sqlite:///{tmp_path / 'memory.db'}", "--config", str(config)]
    env = environment(prefect_server)
    assert invoke("backfill", "archive.jsonl", *args, cwd=tmp_path).exit_code == 0
    summaries: list[float] = []

    def slow_summaries(body: dict) -> object:
        if "response_format" not in body:  # a session's summary
            summaries.append(time.monotonic())
            time.sleep(0.5)
            return completion("A traveller's profile.")
        return memories({"text": "User flies often.", "label": "flights"})

    with fake_openai() as (fake, url):
        fake.responder = slow_summaries
        job_env = {**env, "MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        replay = ["replay", "--extractor", "openai", "--handlers", "semantic", *args]
        victim = start([*replay, "--concurrency", "2", "--json"], tmp_path, job_env)
        took = stop_when(victim, lambda: len(summaries) >= 4, signal.SIGTERM)
        asked = len(summaries)
        out, _ = victim.communicate()
        assert took < 10, f"took {took:.1f} s to stop"
        assert victim.returncode == 143, out
        assert len(summaries) <= asked + 2, "no summary asked for after the signal but in flight"
        document = json.loads(out)
        assert document["kind"] == "interrupted"
        assert document["summaries"] >= 1
        assert document["pending"] > 0, "what is left pending is named"
        [(counts,)] = read(tmp_path / "memory.db", "SELECT counts FROM runs WHERE flow = 'replay'")
        assert json.loads(counts)["pending"] == document["pending"]
        rerun = invoke(
            *replay,
            "--json",
            cwd=tmp_path,
            env={"MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"},
        )
    assert rerun.exit_code == 0, rerun.output
    again = json.loads(rerun.stdout)
    assert again["done"] == again["extractions"] == 60


@pytest.mark.process("a real SIGTERM")
def test_sigterm_stops_a_move_preview_after_the_batch_in_flight_and_it_wrote_nothing(
    prefect_server, tmp_path
) -> None:
    """A preview of a slow model (each request answered in 2 s, three batches of the sample):
    SIGTERM during the first ends it at the batch's end, 143, and the store's bytes are as
    before."""
    from tests.bridging import NEW, healthy, write_scene

    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        healthy(old, new)
        write_scene(tmp_path, old_url, new_url, records=700)
        before = (tmp_path / "mempipe.db").read_bytes()
        turned = new.responder

        def slow(body: dict) -> object:
            answer = turned(body)
            answer.delay = 2.0
            return answer

        new.responder = slow
        asked = len(new.requests)
        preview = start(
            ["reembed", "--model", NEW, "--collections", "stm", "--preview", "--sample", "600"],
            tmp_path,
            environment(prefect_server),
        )
        stop_when(preview, lambda: len(new.requests) > asked, signal.SIGTERM)  # the sample's first
        _, err = preview.communicate(timeout=60)
        sent = len(new.requests) - asked
    assert preview.returncode == 143, err
    assert "the preview stopped by SIGTERM; nothing was written" in err
    assert sent <= 3, "the probe and the batch in flight, nothing after"
    assert (tmp_path / "mempipe.db").read_bytes() == before
