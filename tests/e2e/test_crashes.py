"""Exactly once under crashes, signals and concurrency, proved with real processes: two replays
at once, a replay killed with SIGKILL and resumed at once, a replay stopped by SIGTERM and by a
Ctrl-C to its process group and run again, re-embeds killed and resumed, rolled back
and finalized, and no process left behind by a kill (the other jobs' signals:
``test_job_signals.py``).

Each end state is compared with an uninterrupted run's over the same archive, in which every
owner's home airport and city change month by month: applying an owner's months out of order
would leave an older fact current.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from mempipe.watchdog import descendants
from tests.fakes.openai_server import embeddings, fake_openai
from tests.helpers import (
    MONTHS,
    airport,
    audit,
    copy_store,
    current_airports,
    extraction_counts,
    invoke,
    memories,
    read,
    vectors_of,
    write_archive,
    write_config,
)
from tests.processes import (
    environment,
    kill_when,
    left_behind,
    run,
    start,
    stop_when,
)

pytestmark = pytest.mark.prefect
USERS = 200
HANDLERS = 4
TEMPORARY = environment(None, MEMPIPE_SERVER_MODE="temporary")
"""No Prefect API and Prefect's temporary server: the command's own, stopped with it."""


@pytest.fixture(scope="module")
def reference(prefect_server, tmp_path_factory) -> dict:
    """A backfilled store to copy, and the end state of one uninterrupted replay of it."""
    folder = tmp_path_factory.mktemp("reference")
    write_archive(folder / "archive.jsonl", USERS)
    config = write_config(folder)
    args = ["--store", "sqlite:///backfilled.db", "--config", str(config)]
    loaded = invoke("backfill", "archive.jsonl", *args, cwd=folder)
    assert loaded.exit_code == 0, loaded.output
    copy_store(folder / "backfilled.db", folder / "replayed.db")
    replayed = invoke(
        "replay", "--store", "sqlite:///replayed.db", "--config", str(config), cwd=folder
    )
    assert replayed.exit_code == 0, replayed.output
    db = folder / "replayed.db"
    assert extraction_counts(db) == {"done": USERS * MONTHS * HANDLERS}
    expected = {f"user{u:03d}": airport(u, MONTHS - 1) for u in range(USERS)}
    assert current_airports(db) == expected, "the reference itself ends on June's facts"
    return {
        "folder": folder,
        "config": config,
        "memories": memories(db),
        "audit": audit(db),
        "airports": expected,
    }


def fresh_store(reference: dict, tmp_path: Path) -> tuple[Path, list[str]]:
    db = tmp_path / "memory.db"
    copy_store(reference["folder"] / "backfilled.db", db)
    return db, ["--store", f"sqlite:///{db}", "--config", str(reference["config"])]


def assert_same_end_state(db: Path, reference: dict) -> None:
    assert extraction_counts(db) == {"done": USERS * MONTHS * HANDLERS}, "no work left undone"
    assert current_airports(db) == reference["airports"], "June's facts are current"
    assert memories(db) == reference["memories"], "the same versions, links and evidence"
    assert audit(db) == reference["audit"], "each ADD / UPDATE / REINFORCE exactly once"


@pytest.mark.process("two replays in two processes at once")
def test_two_replays_started_at_once_end_as_one_uninterrupted_run(
    prefect_server, reference, tmp_path
) -> None:
    db, args = fresh_store(reference, tmp_path)
    env = environment(prefect_server)
    first = start(["replay", *args, "--concurrency", "2", "--json"], tmp_path, env)
    second = start(["replay", *args, "--concurrency", "3", "--json"], tmp_path, env)
    outputs = [first.communicate(timeout=600), second.communicate(timeout=600)]
    assert [first.returncode, second.returncode] == [0, 0], outputs
    summaries = [json.loads(out) for out, _ in outputs]
    assert sum(s["done"] for s in summaries) == USERS * MONTHS * HANDLERS, (
        "every extraction was done by exactly one of the two"
    )
    assert_same_end_state(db, reference)


@pytest.mark.process("a replay killed with SIGKILL")
def test_a_replay_killed_part_way_and_resumed_at_once_ends_as_an_uninterrupted_run(
    prefect_server, reference, tmp_path
) -> None:
    db, args = fresh_store(reference, tmp_path)
    env = environment(prefect_server)
    total = USERS * MONTHS * HANDLERS
    victim = start(["replay", *args, "--concurrency", "2"], tmp_path, env)
    kill_when(victim, lambda: extraction_counts(db)["done"] >= total // 10)
    assert extraction_counts(db)["done"] < total, "killed part-way"

    resumed = invoke("replay", *args, "--json", cwd=tmp_path)

    assert resumed.exit_code == 0, resumed.output
    assert_same_end_state(db, reference)
    killed = read(db, "SELECT status, error FROM runs WHERE flow = 'replay' ORDER BY started_at")
    assert killed[0][0] == "failed"
    assert "died" in killed[0][1], "the dead run is closed, not left running"
    assert read(db, "SELECT count(*) FROM leases") == [(0,)], "no claim outlives its run"


@pytest.mark.process("a replay killed with SIGKILL, its pid then gone")
def test_runs_lists_a_dead_run_and_recover_frees_its_claims(
    prefect_server, reference, tmp_path
) -> None:
    db, args = fresh_store(reference, tmp_path)
    env = environment(prefect_server)
    victim = start(["replay", *args, "--concurrency", "1"], tmp_path, env)
    kill_when(victim, lambda: extraction_counts(db)["done"] >= 200)

    listed = invoke("runs", *args, "--running", "--json", cwd=tmp_path)
    assert listed.exit_code == 0, listed.output
    [view] = json.loads(listed.stdout)["runs"]
    assert view["run"]["pid"] == victim.pid
    assert "is gone" in view["dead"]

    recovered = invoke("recover", *args, "--json", cwd=tmp_path)
    assert recovered.exit_code == 0, recovered.output
    [closed] = json.loads(recovered.stdout)["recovered"]
    assert closed["run_id"] == view["run"]["run_id"]
    assert read(db, "SELECT count(*) FROM leases") == [(0,)]
    assert read(db, "SELECT status FROM runs WHERE flow = 'replay'") == [("failed",)]


def reembed_store(reference: dict, tmp_path: Path) -> tuple[Path, list[str]]:
    """The replayed store with its turns (stm) served by hashing-64."""
    db = tmp_path / "memory.db"
    copy_store(reference["folder"] / "replayed.db", db)
    args = ["--store", f"sqlite:///{db}", "--config", str(reference["config"])]
    first = invoke("reembed", "--incremental", *args, cwd=tmp_path)
    assert first.exit_code == 0, first.output
    return db, args


def serving(db: Path) -> dict[str, str]:
    return dict(
        read(db, "SELECT collection, model_id FROM embedding_registry WHERE state = 'serving'")
    )


SLOW_MODEL = "openai:fake-embed:32"


@pytest.mark.process("a re-embed killed with SIGKILL, twice")
def test_a_killed_reembed_can_be_rolled_back_or_resumed_and_finalized_within_a_minute(
    prefect_server, reference, tmp_path
) -> None:
    """The new model answers through the real ``openai`` client from a local endpoint that
    takes its time, so the kill lands part-way."""
    db, args = reembed_store(reference, tmp_path)
    before = serving(db)
    assert before["stm"] == "hashing-64"
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 32, delay=0.01)
        provider = {"MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        slow = environment(prefect_server, **provider)
        move = ["reembed", "--model", SLOW_MODEL, "--collections", "stm", "--batch-size", "8"]
        move += args

        victim = start(move, tmp_path, slow)
        kill_when(victim, lambda: vectors_of(db, SLOW_MODEL) >= 40)
        killed_at = time.monotonic()
        rolled = invoke("reembed", "rollback", *args, "--json", cwd=tmp_path)
        assert rolled.exit_code == 0, rolled.output
        assert serving(db) == before, "the half-built move is dropped, nothing else changed"
        assert vectors_of(db, SLOW_MODEL) == 0

        victim = start(move, tmp_path, slow)
        kill_when(victim, lambda: vectors_of(db, SLOW_MODEL) >= 40)
        assert serving(db) == before, "a killed re-embed switched nothing"
        resumed = invoke(*move, "--json", cwd=tmp_path, env=provider)
        assert resumed.exit_code == 0, resumed.output
        assert json.loads(resumed.stdout)["switched"] is True
        assert serving(db)["stm"] == SLOW_MODEL
        finalized = invoke("reembed", "finalize", *args, "--json", cwd=tmp_path)
        assert finalized.exit_code == 0, finalized.output
    assert time.monotonic() - killed_at < 120, "no lock of a dead run was waited out"
    assert read(db, "SELECT count(*) FROM leases") == [(0,)]


@pytest.mark.process("a command killed with SIGKILL, and its children")
def test_a_command_killed_with_sigkill_leaves_no_process_behind(reference, tmp_path) -> None:
    """With ``MEMPIPE_SERVER_MODE=temporary`` and no Prefect API, the command starts
    Prefect's temporary server of its own."""
    db, args = fresh_store(reference, tmp_path)
    victim = start(["replay", *args, "--concurrency", "1"], tmp_path, TEMPORARY)
    started: set[int] = set()

    def server_up() -> bool:
        started.update(descendants(victim.pid))
        return extraction_counts(db)["done"] > 0

    kill_when(victim, server_up)
    assert started, "the command had started processes of its own"
    assert not (alive := left_behind(started)), f"left behind: {alive}"


@pytest.mark.process("a command killed with SIGKILL, and the session server it used")
def test_a_command_killed_with_sigkill_leaves_the_session_server_to_the_commands_after(
    reference, tmp_path
) -> None:
    """The session's Prefect server is not the killed command's: the command's own processes
    go, the server stays for the next command (the dead command's mark does not keep it), and
    it stops itself once nothing has used it for its idle time."""
    db, args = fresh_store(reference, tmp_path)
    idle = 40  # the kill, the checks and the rerun's start all within it, on a loaded machine
    env = environment(
        None, PREFECT_HOME=str(tmp_path / "prefect"), MEMPIPE_SERVER_IDLE_SECONDS=str(idle)
    )
    victim = start(["replay", *args, "--concurrency", "1"], tmp_path, env)
    started: set[int] = set()

    def underway() -> bool:
        started.update(descendants(victim.pid))
        return extraction_counts(db)["done"] > 0

    kill_when(victim, underway)
    status = json.loads(run(["server", "status", "--json"], tmp_path, env).stdout)
    assert status["running"], status
    assert status["clients"] == [], "a dead command does not count as using the server"
    server = status["server"]["pid"]
    spared = {server} | descendants(server)
    own = started - spared
    assert own, "the command had started processes of its own"
    assert not (alive := left_behind(own)), f"left behind: {alive}"

    rerun = run(["replay", *args, "--json"], tmp_path, env)
    assert rerun.returncode == 0, rerun.stderr
    status = json.loads(run(["server", "status", "--json"], tmp_path, env).stdout)
    assert status["server"]["pid"] == server, "the next command reused it"
    assert_same_end_state(db, reference)

    assert not left_behind({server}, within=idle + 30), "the server stopped itself once idle"
    assert not left_behind(spared, within=10), "and its API with it"
    status = json.loads(run(["server", "status", "--json"], tmp_path, env).stdout)
    assert status["running"] is False


def assert_interrupted_then_completed_by_a_rerun(
    db: Path, args: list[str], out: str, rc: int, expected_rc: int, tmp_path: Path, reference
) -> None:
    assert rc == expected_rc, out
    document = json.loads(out)
    assert document["kind"] == "interrupted"
    [(status, counts, error)] = read(
        db, "SELECT status, counts, error FROM runs WHERE flow = 'replay'"
    )
    assert status == "interrupted", error
    done_now = extraction_counts(db)["done"]
    assert 0 < done_now < USERS * MONTHS * HANDLERS, "stopped part-way"
    assert json.loads(counts)["done"] == document["done"] == done_now, "its true counts"
    assert read(db, "SELECT count(*) FROM leases") == [(0,)], "its claims released"
    rerun = invoke("replay", *args, "--json", cwd=tmp_path)
    assert rerun.exit_code == 0, rerun.output
    assert_same_end_state(db, reference)


@pytest.mark.process("a real SIGTERM")
def test_sigterm_stops_a_replay_within_seconds_recorded_interrupted_and_a_rerun_completes(
    prefect_server, reference, tmp_path
) -> None:
    db, args = fresh_store(reference, tmp_path)
    env = environment(prefect_server)
    victim = start(["replay", *args, "--concurrency", "2", "--json"], tmp_path, env)
    total = USERS * MONTHS * HANDLERS
    took = stop_when(victim, lambda: extraction_counts(db)["done"] >= total // 10, signal.SIGTERM)
    out, _ = victim.communicate()
    assert took < 10, f"took {took:.1f} s to stop"
    assert_interrupted_then_completed_by_a_rerun(
        db, args, out, victim.returncode, 143, tmp_path, reference
    )


@pytest.mark.process("a Ctrl-C to a process group")
def test_ctrl_c_to_the_process_group_stops_a_replay_and_its_temporary_server(
    prefect_server, reference, tmp_path
) -> None:
    """With ``MEMPIPE_SERVER_MODE=temporary`` and no Prefect API, the command starts its own
    temporary server; the terminal's Ctrl-C reaches the whole process group."""
    db, args = fresh_store(reference, tmp_path)
    env = TEMPORARY
    victim = start(
        ["replay", *args, "--concurrency", "2", "--json"], tmp_path, env, start_new_session=True
    )
    started: set[int] = set()

    def underway() -> bool:
        started.update(descendants(victim.pid))
        return extraction_counts(db)["done"] >= 200

    took = stop_when(victim, underway, signal.SIGINT, group=True)
    out, _ = victim.communicate()
    assert took < 10, f"took {took:.1f} s to stop"
    assert not (alive := left_behind(started, within=30)), f"left behind: {alive}"
    assert_interrupted_then_completed_by_a_rerun(
        db, args, out, victim.returncode, 130, tmp_path, reference
    )


@pytest.mark.process("a real SIGTERM")
def test_sigterm_stops_a_reembed_with_serving_unchanged_and_a_rerun_switches(
    prefect_server, reference, tmp_path
) -> None:
    db, args = reembed_store(reference, tmp_path)
    before = serving(db)
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 32, delay=0.01)
        provider = {"MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        slow = environment(prefect_server, **provider)
        move = ["reembed", "--model", SLOW_MODEL, "--collections", "stm", "--batch-size", "8"]
        victim = start([*move, *args, "--json"], tmp_path, slow)
        took = stop_when(victim, lambda: vectors_of(db, SLOW_MODEL) >= 40, signal.SIGTERM)
        out, _ = victim.communicate()

        assert took < 10, f"took {took:.1f} s to stop"
        assert victim.returncode == 143, out
        assert json.loads(out)["kind"] == "interrupted"
        assert serving(db) == before, "a stopped re-embed switched nothing"
        [(status,)] = read(
            db, "SELECT status FROM runs WHERE flow = 'reembed' ORDER BY started_at DESC LIMIT 1"
        )
        assert status == "interrupted"
        assert read(db, "SELECT count(*) FROM leases") == [(0,)], "its lock released"

        resumed = invoke(*move, *args, "--json", cwd=tmp_path, env=provider)
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["switched"] is True
    assert serving(db)["stm"] == SLOW_MODEL


RETENTION = """  retention:
    turns: {max_age: 90d}
    semantic: {max_per_user: 2}
    keep_versions: 1
"""
FORGET_AS_OF = ["--as-of", "2024-08-01"]


def forgotten_state(db: Path) -> tuple:
    """What is left of every collection, and each FORGET row (what, which, why) once."""
    left = read(db, "SELECT session_id, turn_seq FROM turns ORDER BY 1, 2")
    kept = memories(db)
    rows = read(
        db,
        "SELECT memory_type, memory_id, rule, count(*) FROM audit WHERE action = 'FORGET' "
        "GROUP BY 1, 2, 3 ORDER BY 1, 2",
    )
    return left, kept, rows


@pytest.fixture(scope="module")
def forgotten(reference: dict, tmp_path_factory) -> dict:
    """The replayed reference with a retention policy, and its end state after one
    uninterrupted forget."""
    folder = tmp_path_factory.mktemp("forgotten")
    config = folder / "project-config.yaml"
    config.write_text(reference["config"].read_text() + RETENTION)
    copy_store(reference["folder"] / "replayed.db", folder / "whole.db")
    done = invoke("forget", *FORGET_AS_OF, "--store", "sqlite:///whole.db", cwd=folder)
    assert done.exit_code == 0, done.output
    state = forgotten_state(folder / "whole.db")
    assert state[2], "the policy forgets something"
    assert all(n == 1 for *_, n in state[2]), "each record forgotten once"
    return {"config": config, "state": state}


def forgetting_store(reference: dict, forgotten: dict, tmp_path: Path) -> tuple[Path, list[str]]:
    db = tmp_path / "memory.db"
    copy_store(reference["folder"] / "replayed.db", db)
    return db, ["--store", f"sqlite:///{db}", "--config", str(forgotten["config"])]


def forget_rows(db: Path) -> int:
    return read(db, "SELECT count(*) FROM audit WHERE action = 'FORGET'")[0][0]


@pytest.mark.process("a forget killed with SIGKILL")
def test_a_forget_killed_part_way_and_rerun_ends_as_an_uninterrupted_one(
    prefect_server, reference, forgotten, tmp_path
) -> None:
    db, args = forgetting_store(reference, forgotten, tmp_path)
    env = environment(prefect_server)
    victim = start(["forget", *FORGET_AS_OF, *args, "--batch-size", "5"], tmp_path, env)
    kill_when(victim, lambda: forget_rows(db) > 0)
    assert 0 < forget_rows(db) < len(forgotten["state"][2]), "killed part-way"

    rerun = invoke("forget", *FORGET_AS_OF, *args, "--json", cwd=tmp_path)

    assert rerun.exit_code == 0, rerun.output
    assert forgotten_state(db) == forgotten["state"]
    replayed = invoke("replay", "--force", *args, "--json", cwd=tmp_path)
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.stdout)["added"] == 0, "a replay re-creates nothing forgotten"
    assert forgotten_state(db)[:2] == forgotten["state"][:2]


@pytest.mark.process("a forget stopped by SIGTERM")
def test_sigterm_stops_a_forget_between_batches_recorded_interrupted_and_a_rerun_completes(
    prefect_server, reference, forgotten, tmp_path
) -> None:
    db, args = forgetting_store(reference, forgotten, tmp_path)
    env = environment(prefect_server)
    victim = start(["forget", *FORGET_AS_OF, *args, "--batch-size", "5"], tmp_path, env)
    took = stop_when(victim, lambda: forget_rows(db) > 0, signal.SIGTERM)
    assert victim.returncode == 143
    assert took < 10
    assert forget_rows(db) < len(forgotten["state"][2]), "stopped part-way"
    [(status,)] = read(db, "SELECT status FROM runs WHERE flow = 'retention'")
    assert status == "interrupted"

    rerun = invoke("forget", *FORGET_AS_OF, *args, cwd=tmp_path)

    assert rerun.exit_code == 0, rerun.output
    assert forgotten_state(db) == forgotten["state"]
