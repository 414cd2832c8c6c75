"""A move's bridge (``reembed --model NEW --bridge``, issue 57): fitted on a sample before the
move, kept in the registry, it answers the searches, evaluations and the gate that the serving
model can no longer embed (its endpoint refuses it), says so every time, and the switch retires
it. The real ``openai`` client against two fake endpoints: the old model the hashing model's
vectors, the new one the same turned by a rotation, so a good map finds what the old model
found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, embeddings, fake_openai, refused, rotated
from tests.helpers import invoke

pytestmark = pytest.mark.prefect
OLD, NEW = "openai:old-embed:32", "openai:new-embed:32"
QUESTIONS = [(7, "seat 7 by the window"), (42, "seat 42 by the window")]


def write_store(folder: Path, old_url: str, new_url: str) -> None:
    (folder / "project-config.yaml").write_text(
        f"memory:\n  embedding:\n    model: {OLD}\n    endpoints:\n"
        f"      {OLD}:\n        base_url: {old_url}\n      {NEW}:\n        base_url: {new_url}\n"
    )
    (folder / "a.jsonl").write_text(
        "".join(
            json.dumps(
                {"session_id": f"s{n}", "role": "user", "content": f"seat {n} by the window {n}"}
            )
            + "\n"
            for n in range(160)
        )
    )
    (folder / "q.jsonl").write_text(
        "".join(
            json.dumps({"query": text, "user_id": "ann", "relevant_ids": [f"s{n}#0"]}) + "\n"
            for n, text in QUESTIONS
        )
    )
    done = invoke("backfill", "a.jsonl", "--user-id", "ann", "--embed", cwd=folder)
    assert done.exit_code == 0, done.output


def searched(folder: Path, query: str) -> tuple[int, dict[str, Any], str]:
    done = invoke(
        "search",
        query,
        "--user-id",
        "ann",
        "--source",
        "stm",
        "--mode",
        "semantic",
        "--json",
        cwd=folder,
    )
    return done.exit_code, json.loads(done.stdout) if done.exit_code == 0 else {}, done.stderr


def ids(found: dict[str, Any]) -> list[str]:
    return [hit["id"] for hit in found["hits"]]


def down(fake: FakeOpenAI, model: str) -> None:
    fake.responder = lambda body: refused(model)


def up(fake: FakeOpenAI, answer: Any) -> None:
    fake.responder = answer


def test_a_bridge_answers_what_the_refused_serving_model_cannot_and_the_switch_retires_it(
    prefect_server, tmp_path
) -> None:
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        up(old, lambda body: embeddings(body, 32))
        up(new, rotated(32))
        write_store(tmp_path, old_url, new_url)
        before = {q: ids(searched(tmp_path, q)[1]) for _, q in QUESTIONS}

        down(old, "old-embed")
        code, _, stderr = searched(tmp_path, QUESTIONS[0][1])
        assert code == 1, "no bridge yet: the failure, never silence"
        assert "old-embed" in stderr

        up(old, lambda body: embeddings(body, 32))
        impossible = invoke(
            "reembed",
            "--model",
            NEW,
            "--collections",
            "stm",
            "--bridge",
            "--sample",
            "150",
            "--gate",
            "q.jsonl",
            "--gate-source",
            "stm",
            "--min-recall-ratio",
            "10",
            "--json",
            cwd=tmp_path,
        )
        summary = json.loads(impossible.stdout)
        assert impossible.exit_code == 1, impossible.output
        assert not summary["switched"]
        (bridge,) = summary["bridges"]
        assert (bridge["serving_model"], bridge["query_model"]) == (OLD, NEW)
        assert bridge["pairs"] == 150
        assert bridge["held_out_cosine"] > 0.99
        assert "weights" not in bridge

        down(old, "old-embed")
        for _, query in QUESTIONS:
            code, found, stderr = searched(tmp_path, query)
            assert code == 0, stderr
            assert ids(found)[0] == before[query][0], "through the bridge, the old model's best"
            assert len(set(ids(found)) & set(before[query])) >= 8, "and most of its ten"
            assert found["bridge"]["query_model"] == NEW
            assert "old-embed" in found["bridge"]["reason"]
            assert "warning: stm: answered through the bridge" in stderr
        evaluated = invoke(
            "eval", "q.jsonl", "--source", "stm", "--mode", "semantic", "--json", cwd=tmp_path
        )
        assert evaluated.exit_code == 0, evaluated.output
        assert json.loads(evaluated.stdout)["bridged"] == len(QUESTIONS)
        assert json.loads(evaluated.stdout)["recall"] == 1.0
        listed = json.loads(invoke("models", "--json", cwd=tmp_path).stdout)
        assert [b["query_model"] for m in listed if m["id"] == OLD for b in m["bridges"]] == [NEW]

        asked = len(new.requests)
        moved = invoke(
            "reembed",
            "--model",
            NEW,
            "--collections",
            "stm",
            "--bridge",
            "--sample",
            "150",
            "--gate",
            "q.jsonl",
            "--gate-source",
            "stm",
            "--json",
            cwd=tmp_path,
        )
        assert moved.exit_code == 0, moved.output
        summary = json.loads(moved.stdout)
        assert summary["switched"]
        assert summary["gate"]["passed"]
        assert summary["gate"]["old_bridged"] == len(QUESTIONS), "the old side through the bridge"
        assert summary["gate"]["old_recall"] == 1.0
        sample_sent = [r for r in new.requests[asked:] if len(r["input"]) >= 150]
        assert not sample_sent, "the kept bridge was reused, its sample not asked again"

        code, found, stderr = searched(tmp_path, QUESTIONS[0][1])
        assert code == 0
        assert found["bridge"] is None
        assert "warning" not in stderr
        listed = json.loads(invoke("models", "--json", cwd=tmp_path).stdout)
        assert all(not m["bridges"] for m in listed), "the switch retired the bridge"


def test_a_bridge_needs_enough_records_and_a_move(prefect_server, tmp_path) -> None:
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        up(old, lambda body: embeddings(body, 32))
        up(new, rotated(32))
        write_store(tmp_path, old_url, new_url)
        few = invoke(
            "reembed",
            "--model",
            NEW,
            "--collections",
            "stm",
            "--bridge",
            "--sample",
            "50",
            cwd=tmp_path,
        )
        assert few.exit_code != 0
        assert "50 record(s) carry both models' vectors" in few.output
        assert "at least 100" in few.output
        for extra in ("--incremental", "--preview"):
            refused_run = invoke("reembed", "--model", NEW, "--bridge", extra, cwd=tmp_path)
            assert refused_run.exit_code != 0
            assert f"leave out {extra}" in refused_run.output
        listed = json.loads(invoke("models", "--json", cwd=tmp_path).stdout)
        assert all(not m["bridges"] for m in listed)


def test_an_answer_is_never_bridged_while_the_serving_model_answers(prefect_server, tmp_path):
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        up(old, lambda body: embeddings(body, 32))
        up(new, rotated(32))
        write_store(tmp_path, old_url, new_url)
        invoke(
            "reembed",
            "--model",
            NEW,
            "--collections",
            "stm",
            "--bridge",
            "--sample",
            "150",
            "--gate",
            "q.jsonl",
            "--gate-source",
            "stm",
            "--min-recall-ratio",
            "10",
            cwd=tmp_path,
        )
        asked = len(new.requests)
        code, found, _ = searched(tmp_path, QUESTIONS[1][1])
        assert code == 0
        assert found["bridge"] is None
        assert len(new.requests) == asked, "the bridge's model is not asked while the old answers"


def test_reembed_bridge_fits_without_moving_and_the_move_reuses_it(prefect_server, tmp_path):
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        up(old, lambda body: embeddings(body, 32))
        up(new, rotated(32))
        write_store(tmp_path, old_url, new_url)
        fitted = invoke(
            "reembed",
            "bridge",
            "--model",
            NEW,
            "--collections",
            "stm",
            "--sample",
            "150",
            "--json",
            cwd=tmp_path,
        )
        assert fitted.exit_code == 0, fitted.output
        (bridge,) = json.loads(fitted.stdout)["bridges"]
        assert bridge["query_model"] == NEW
        listed = json.loads(invoke("models", "--json", cwd=tmp_path).stdout)
        serving = next(m for m in listed if m["id"] == OLD)
        assert serving["active"], "nothing moved: the old model serves"
        assert [b["query_model"] for b in serving["bridges"]] == [NEW]

        down(old, "old-embed")
        code, found, _ = searched(tmp_path, QUESTIONS[1][1])
        assert code == 0
        assert found["bridge"] is not None
        asked = len(new.requests)
        moved = invoke(
            "reembed",
            "--model",
            NEW,
            "--collections",
            "stm",
            "--bridge",
            "--batch-size",
            "50",
            "--sample",
            "150",
            "--json",
            cwd=tmp_path,
        )
        assert moved.exit_code == 0, moved.output
        assert json.loads(moved.stdout)["bridges"][0]["fitted_at"] == bridge["fitted_at"]
        assert all(len(r["input"]) < 150 for r in new.requests[asked:]), "no second sample"
