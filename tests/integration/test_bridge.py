"""A move's bridge (``reembed bridge``, ``reembed --model NEW --bridge``, issue 57): fitted on a
sample, kept in the registry, it answers the searches, evaluations and the gate that the
serving model can no longer embed (its endpoint refuses it), says so every time, and the switch
retires it. The real ``openai`` client against two fake endpoints (``tests/bridging.py``): the
old model the hashing model's vectors, the new one the same turned by a rotation, so a good map
finds what the old model found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bridging import NEW, OLD, QUESTIONS, healthy, write_scene
from tests.fakes.openai_server import FakeOpenAI, embeddings, fake_openai, refused
from tests.helpers import invoke

pytestmark = pytest.mark.prefect
FIRST, SECOND = list(QUESTIONS.values())[:2]


def searched(folder: Path, query: str) -> tuple[int, dict[str, Any], str]:
    done = invoke(
        "search", query, "--user-id", "ann", "--source", "stm", "--mode", "semantic", "--json",
        cwd=folder,
    )  # fmt: skip
    return done.exit_code, json.loads(done.stdout) if done.exit_code == 0 else {}, done.stderr


def move(folder: Path, *options: str) -> tuple[int, dict[str, Any], str]:
    """``reembed --model NEW --collections stm --bridge --sample 150 OPTIONS --json``."""
    done = invoke(
        "reembed", "--model", NEW, "--collections", "stm", "--bridge", "--sample", "150",
        *options, "--json", cwd=folder,
    )  # fmt: skip
    return done.exit_code, json.loads(done.stdout) if done.stdout else {}, done.output


def ids(found: dict[str, Any]) -> list[str]:
    return [hit["id"] for hit in found["hits"]]


def down(fake: FakeOpenAI) -> None:
    fake.responder = lambda body: refused("old-embed")


def bridges_of(folder: Path) -> dict[str, list[str]]:
    listed = json.loads(invoke("models", "--json", cwd=folder).stdout)
    return {m["id"]: [b["query_model"] for b in m["bridges"]] for m in listed if m["bridges"]}


GATE = ("--gate", "q.jsonl", "--gate-source", "stm")


def test_a_bridge_answers_what_the_refused_serving_model_cannot_and_the_switch_retires_it(
    prefect_server, tmp_path
) -> None:
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        healthy(old, new)
        write_scene(tmp_path, old_url, new_url)
        before = {q: ids(searched(tmp_path, q)[1]) for q in QUESTIONS.values()}

        down(old)
        code, _, stderr = searched(tmp_path, FIRST)
        assert code == 1, "no bridge yet: the failure, never silence"
        assert "old-embed" in stderr

        healthy(old, new)
        code, summary, output = move(tmp_path, *GATE, "--min-recall-ratio", "10")
        assert code == 1, output
        assert not summary["switched"]
        (bridge,) = summary["bridges"]
        assert (bridge["serving_model"], bridge["query_model"]) == (OLD, NEW)
        assert bridge["pairs"] == 150
        assert bridge["held_out_cosine"] > 0.99
        assert "weights" not in bridge

        down(old)
        for query in QUESTIONS.values():
            code, found, stderr = searched(tmp_path, query)
            assert code == 0, stderr
            assert ids(found)[0] == before[query][0], "through the bridge, the old model's best"
            assert found["bridge"]["query_model"] == NEW
            assert "old-embed" in found["bridge"]["reason"]
            assert "warning: stm: answered through the bridge" in stderr
        evaluated = invoke(
            "eval", "q.jsonl", "--source", "stm", "--mode", "semantic", "--json", cwd=tmp_path
        )
        assert evaluated.exit_code == 0, evaluated.output
        assert json.loads(evaluated.stdout)["bridged"] == len(QUESTIONS)
        assert json.loads(evaluated.stdout)["recall"] == 1.0
        assert bridges_of(tmp_path) == {OLD: [NEW]}

        asked = len(new.requests)
        code, summary, output = move(tmp_path, *GATE, "--batch-size", "50")
        assert code == 0, output
        assert summary["switched"]
        assert summary["gate"]["passed"]
        assert summary["gate"]["old_bridged"] == len(QUESTIONS), "the old side through the bridge"
        assert summary["gate"]["old_recall"] == 1.0
        assert all(len(r["input"]) < 150 for r in new.requests[asked:]), "the bridge reused"

        code, found, stderr = searched(tmp_path, FIRST)
        assert code == 0
        assert found["bridge"] is None
        assert "warning" not in stderr
        assert bridges_of(tmp_path) == {}, "the switch retired the bridge"


def test_a_bridge_needs_enough_records_and_a_move(prefect_server, tmp_path) -> None:
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        healthy(old, new)
        write_scene(tmp_path, old_url, new_url)
        few = invoke(
            "reembed", "--model", NEW, "--collections", "stm", "--bridge", "--sample", "50",
            cwd=tmp_path,
        )  # fmt: skip
        assert few.exit_code != 0
        assert "50 record(s) carry both models' vectors" in few.output
        assert "at least 100" in few.output
        for extra in ("--incremental", "--preview"):
            refused_run = invoke("reembed", "--model", NEW, "--bridge", extra, cwd=tmp_path)
            assert refused_run.exit_code != 0
            assert f"leave out {extra}" in refused_run.output
        assert bridges_of(tmp_path) == {}


def test_an_answer_is_never_bridged_while_the_serving_model_answers(prefect_server, tmp_path):
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        healthy(old, new)
        write_scene(tmp_path, old_url, new_url)
        move(tmp_path, *GATE, "--min-recall-ratio", "10")
        asked = len(new.requests)
        code, found, _ = searched(tmp_path, SECOND)
        assert code == 0
        assert found["bridge"] is None
        assert len(new.requests) == asked, "the bridge's model is not asked while the old answers"


def test_reembed_bridge_fits_without_moving_and_the_move_reuses_it(prefect_server, tmp_path):
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        healthy(old, new)
        write_scene(tmp_path, old_url, new_url)
        fitted = invoke(
            "reembed", "bridge", "--model", NEW, "--collections", "stm", "--sample", "150",
            "--json", cwd=tmp_path,
        )  # fmt: skip
        assert fitted.exit_code == 0, fitted.output
        (bridge,) = json.loads(fitted.stdout)["bridges"]
        assert bridge["query_model"] == NEW
        assert bridges_of(tmp_path) == {OLD: [NEW]}
        listed = json.loads(invoke("models", "--json", cwd=tmp_path).stdout)
        assert [m["id"] for m in listed if m["active"]] == [OLD], "nothing moved"

        down(old)
        code, found, _ = searched(tmp_path, SECOND)
        assert code == 0
        assert found["bridge"] is not None
        asked = len(new.requests)
        code, summary, output = move(tmp_path, "--batch-size", "50")
        assert code == 0, output
        assert summary["bridges"][0]["fitted_at"] == bridge["fitted_at"]
        assert all(len(r["input"]) < 150 for r in new.requests[asked:]), "no second sample"


def test_a_bridge_that_carries_vectors_poorly_is_fitted_with_a_warning(prefect_server, tmp_path):
    """A new model unrelated to the old (random vectors of each text): the fit's held-out cosine
    is low, and the command says what searching through it would be worth."""
    import zlib

    import numpy as np

    def unrelated(body: dict[str, Any]) -> Any:
        answer = embeddings(body, 32)
        for item, text in zip(answer.body["data"], body["input"], strict=True):
            seed = zlib.crc32(text.encode())
            item["embedding"] = np.random.default_rng(seed).normal(size=32).tolist()
        return answer

    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        healthy(old, new)
        write_scene(tmp_path, old_url, new_url)
        new.responder = unrelated
        fitted = invoke(
            "reembed", "bridge", "--model", NEW, "--collections", "stm", "--sample", "150",
            cwd=tmp_path,
        )  # fmt: skip
    assert fitted.exit_code == 0, fitted.output
    assert "warning: the bridge from openai:new-embed:32" in fitted.stderr
    assert "carries vectors poorly (held-out cosine 0." in fitted.stderr


def test_a_bridges_plan_counts_the_texts_and_requests_its_fit_then_sends(prefect_server, tmp_path):
    """The same seed draws the same records: ``--plan`` prices the very sample the fit embeds,
    and the move's plan with ``--bridge`` carries the same line."""
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        healthy(old, new)
        write_scene(tmp_path, old_url, new_url)
        asking = ("reembed", "bridge", "--model", NEW, "--collections", "stm", "--sample", "150")
        planned = invoke(*asking, "--seed", "4", "--plan", "--json", cwd=tmp_path)
        assert planned.exit_code == 0, planned.output
        (line,) = json.loads(planned.stdout)["lines"]
        moving = ("reembed", "--model", NEW, "--collections", "stm", "--bridge", "--sample", "150")
        move_plan = invoke(*moving, "--seed", "4", "--plan", "--json", cwd=tmp_path)
        assert line in json.loads(move_plan.stdout)["lines"]
        asked = len(new.requests)
        fitted = invoke(*asking, "--seed", "4", cwd=tmp_path)
        assert fitted.exit_code == 0, fitted.output
        sent = new.requests[asked:]
    assert line["purpose"] == "fit the bridge of stm"
    assert line["items"] == sum(len(r["input"]) for r in sent) == 150
    assert line["requests"] == len(sent)
    kept = invoke(*asking, "--seed", "4", "--plan", "--json", cwd=tmp_path)
    assert json.loads(kept.stdout)["lines"] == [], "the kept bridge is reused: nothing to send"
