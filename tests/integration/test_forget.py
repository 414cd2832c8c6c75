"""Forgetting by a retention policy, through the command over a real SQLite store: the plan
counts what the run forgets record for record; a turn not yet extracted, a pinned user and a
pinned memory stay; a memory goes with its versions, and versions beyond ``keep_versions``
go; each forgotten record leaves a FORGET audit row without text, and the text of the
memory's earlier rows is redacted in the store and the audit files; what the policy expires
is left out of search and eval before the run; no replay re-creates what was forgotten; a bad
policy, or a time to come, is refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from mempipe.schemas.bundle import REDACTED
from mempipe.services.report.page import DATA_BLOCK, PageFigures
from tests.helpers import invoke, read, write_archive, write_config

pytestmark = pytest.mark.usefixtures("prefect_server")

AS_OF = "2024-08-01"
POLICY = """  retention:
    turns: {max_age: 90d}
    semantic: {max_per_user: 2}
    keep_versions: 1
    pinned_users: [user002]
"""
"""As of August 2024 the months 1-4 (January to April) of turns are older than 90 days; each
user keeps two semantic facts (the newest confirmed) and one earlier version of each."""


def _store(folder: Path, policy: str = POLICY, *, replay: bool = True) -> Path:
    write_archive(folder / "archive.jsonl", 3)
    config = write_config(folder)
    db = folder / "m.db"
    store = f"sqlite:///{db}"
    assert invoke("backfill", "archive.jsonl", "--store", store, cwd=folder).exit_code == 0
    if replay:
        assert invoke("replay", "--store", store, cwd=folder).exit_code == 0
    config.write_text(config.read_text() + policy)
    return db


def _forget(folder: Path, *options: str) -> dict:
    done = invoke(
        "forget",
        "--as-of",
        AS_OF,
        "--json",
        *options,
        "--store",
        f"sqlite:///{folder / 'm.db'}",
        cwd=folder,
    )
    assert done.exit_code == 0, done.stderr
    return json.loads(done.stdout)


def _records(db: Path) -> set[tuple[str, str]]:
    turns = {("turns", f"{s}#{n}") for s, n in read(db, "SELECT session_id, turn_seq FROM turns")}
    facts = {
        (t, i)
        for t in ("semantic", "episodic", "procedural", "taxonomic")
        for (i,) in read(db, f"SELECT id FROM memories_{t}")
    }
    return turns | facts


def _counts(summary: dict) -> dict[tuple, int]:
    return {(c["user_id"], c["collection"], c["rule"]): c["records"] for c in summary["counts"]}


def test_the_plan_counts_what_the_run_forgets_record_for_record(tmp_path: Path) -> None:
    db = _store(tmp_path)
    before = _records(db)
    plan = _forget(tmp_path, "--plan")
    assert _records(db) == before, "a plan writes nothing"
    assert plan["forgotten"] > 0
    done = _forget(tmp_path)
    gone = before - _records(db)
    assert _counts(done) == _counts(plan)
    assert len(gone) == done["forgotten"] == plan["forgotten"]
    rows = read(db, "SELECT memory_type, memory_id, rule, text FROM audit WHERE action = 'FORGET'")
    assert {(t, i) for t, i, _, _ in rows} == gone
    assert {text for *_, text in rows} == {""}, "a FORGET row holds no text"
    assert {rule for _, _, rule, _ in rows} == {r for _, _, r in _counts(done)}


def test_each_rule_takes_what_it_names_and_pins_keep_theirs(tmp_path: Path) -> None:
    db = _store(tmp_path)
    _forget(tmp_path)
    kept_turns = read(db, "SELECT user_id, min(created_at) FROM turns GROUP BY user_id")
    by_user = dict(kept_turns)
    assert by_user["user002"].startswith("2024-01"), "a pinned user keeps everything"
    assert by_user["user000"] >= "2024-05", "turns said before May 3 are gone"
    active = dict(
        read(
            db, "SELECT user_id, count(*) FROM memories_semantic WHERE status = 'active' GROUP BY 1"
        )
    )
    assert active["user000"] == 2
    assert active["user002"] > 2
    depth = read(
        db,
        "SELECT count(*) FROM memories_semantic s WHERE s.user_id = 'user000' "
        "AND s.status = 'superseded'",
    )[0][0]
    assert depth <= 2, "one superseded version of each of the two kept facts at most"


def test_a_turn_not_yet_extracted_is_never_forgotten(tmp_path: Path) -> None:
    db = _store(tmp_path, replay=False)
    turns = read(db, "SELECT count(*) FROM turns")[0][0]
    plan = _forget(tmp_path, "--plan")
    assert plan["forgotten"] == 0
    _forget(tmp_path)
    assert read(db, "SELECT count(*) FROM turns")[0][0] == turns


def test_a_pinned_memory_stays_whatever_the_rules_say(tmp_path: Path) -> None:
    db = _store(tmp_path)
    oldest = read(
        db,
        "SELECT id FROM memories_semantic WHERE user_id = 'user000' AND status = 'active' "
        "ORDER BY updated_at LIMIT 1",
    )[0][0]
    config = tmp_path / "project-config.yaml"
    config.write_text(config.read_text() + f"    pinned_memories: [{oldest}]\n")
    _forget(tmp_path)
    assert read(db, f"SELECT status FROM memories_semantic WHERE id = '{oldest}'") == [("active",)]


def test_a_forgotten_memory_text_is_redacted_in_the_audit_and_its_files(tmp_path: Path) -> None:
    db = _store(tmp_path)
    page = tmp_path / "report.html"
    reported = ("report", "--store", f"sqlite:///{db}", "--out", "audit", "--html", str(page))
    assert invoke(*reported, cwd=tmp_path).exit_code == 0
    done = _forget(tmp_path)
    forgets = "SELECT memory_type, memory_id FROM audit WHERE action = 'FORGET'"
    gone = {i for t, i in read(db, forgets) if t == "semantic"}
    texts = read(db, "SELECT memory_id, text FROM audit WHERE action != 'FORGET'")
    assert {t for i, t in texts if i in gone} == {REDACTED}
    assert any(t != REDACTED for i, t in texts if i not in gone), "kept memories keep their text"
    frame = pl.read_parquet(tmp_path / "audit" / "**" / "*.parquet", hive_partitioning=False)
    assert set(frame.filter(pl.col("memory_id").is_in(list(gone)))["text"]) == {REDACTED}
    figures = PageFigures.model_validate_json(
        DATA_BLOCK.search(page.read_text())[1].replace("<\\/", "</")
    )
    shown = [*figures.reinforced, *figures.updated]
    assert any(row.memory_id in gone for row in shown), "the page showed a forgotten memory"
    assert {row.text for row in shown if row.memory_id in gone} == {REDACTED}
    assert done["files_redacted"] > 0


def test_the_report_and_its_page_show_the_forget_rows(tmp_path: Path) -> None:
    db = _store(tmp_path)
    _forget(tmp_path)
    page = tmp_path / "report.html"
    reported = ("report", "--store", f"sqlite:///{db}", "--out", "audit", "--html", str(page))
    assert invoke(*reported, cwd=tmp_path).exit_code == 0
    frame = pl.read_parquet(tmp_path / "audit" / "**" / "*.parquet", hive_partitioning=False)
    forgotten = frame.filter(pl.col("action") == "FORGET")
    assert len(forgotten) == read(db, "SELECT count(*) FROM audit WHERE action = 'FORGET'")[0][0]
    assert set(forgotten["rule"]) >= {"turns.max_age", "semantic.max_per_user"}
    figures = PageFigures.model_validate_json(
        DATA_BLOCK.search(page.read_text())[1].replace("<\\/", "</")
    )
    drawn = {(r["memory_type"], r["action"]) for r in figures.actions}
    assert {("turns", "FORGET"), ("semantic", "FORGET")} <= drawn


def test_expired_records_are_left_out_of_search_and_eval_before_the_run(tmp_path: Path) -> None:
    db = _store(tmp_path, policy="")
    store = f"sqlite:///{db}"
    text = "Noted, I have updated your travel profile."
    asked = ("search", text, "--source", "stm", "--mode", "text", "--user-id", "user000")
    found = json.loads(invoke(*asked, "--json", "--store", store, cwd=tmp_path).stdout)["hits"]
    relevant = [h["id"] for h in found if h["text"] == text]
    assert len(relevant) == 6, "one such turn a month"
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"query": text, "relevant_ids": relevant, "user_id": "user000"}))
    scored = ("eval", str(queries), "--source", "stm", "--mode", "text", "--json")
    assert json.loads(invoke(*scored, "--store", store, cwd=tmp_path).stdout)["recall"] == 1.0
    config = tmp_path / "project-config.yaml"
    config.write_text(config.read_text() + "  retention:\n    turns: {max_age: 90d}\n")
    searched = invoke(*asked, "--json", "--store", store, cwd=tmp_path)
    assert json.loads(searched.stdout)["hits"] == [], "every turn of 2024 is past 90 days now"
    assert "retention policy has expired" in searched.stderr
    assert json.loads(invoke(*scored, "--store", store, cwd=tmp_path).stdout)["recall"] == 0.0
    assert read(db, "SELECT count(*) FROM turns WHERE user_id = 'user000'") == [(12,)]


def test_no_replay_recreates_a_forgotten_memory(tmp_path: Path) -> None:
    db = _store(tmp_path)
    _forget(tmp_path)
    after = _records(db)
    replayed = invoke("replay", "--force", "--json", "--store", f"sqlite:///{db}", cwd=tmp_path)
    assert replayed.exit_code == 0, replayed.stderr
    assert json.loads(replayed.stdout)["added"] == 0
    assert _records(db) == after


def test_without_a_policy_nothing_is_forgotten(tmp_path: Path) -> None:
    db = _store(tmp_path, policy="")
    before = _records(db)
    done = _forget(tmp_path)
    assert done["forgotten"] == 0
    assert done["policy"] is None
    assert _records(db) == before
    assert read(db, "SELECT count(*) FROM runs WHERE flow = 'retention'") == [(0,)]


@pytest.mark.parametrize(
    ("policy", "reason"),
    [
        ("  retention:\n    turns: {max_age: 90}\n", "is not an age"),
        ("  retention:\n    turns: {}\n", "max_age, max_per_user or both"),
        ("  retention:\n    semantic: {max_per_user: 0}\n", "greater than or equal to 1"),
        ("  retention:\n    sessions: {max_age: 9d}\n", "sessions"),
    ],
)
def test_a_bad_policy_is_refused_with_its_reason_before_anything_runs(
    tmp_path: Path, policy: str, reason: str
) -> None:
    db = _store(tmp_path, policy=policy)
    before = _records(db)
    refused = invoke("forget", "--store", f"sqlite:///{db}", cwd=tmp_path)
    assert refused.exit_code != 0
    assert reason in refused.stderr
    assert _records(db) == before


def test_a_time_to_come_is_refused(tmp_path: Path) -> None:
    db = _store(tmp_path)
    refused = invoke("forget", "--as-of", "2999-01-01", "--store", f"sqlite:///{db}", cwd=tmp_path)
    assert refused.exit_code != 0
    assert "later than now" in refused.stderr
