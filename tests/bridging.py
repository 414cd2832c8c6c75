"""The scene of a move whose old model goes away halfway (issue 57), shared by the command's
and the deployment's tests: two fake endpoints (the old model the hashing model's vectors, the
new one the same turned by a rotation, each answer slowed so the move lasts), a store of turns
embedded by the old model, labelled queries, and the old endpoint refusing its model from the
new one's second batch of the move on."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Answer, FakeOpenAI, embeddings, refused, rotated
from tests.helpers import invoke

OLD, NEW = "openai:old-embed:32", "openai:new-embed:32"
RECORDS = 200
BATCH = 20
"""Records a move's request carries: the move is ten requests, the old model gone after two."""
QUESTIONS = {7: "seat 7 by the window", 42: "seat 42 by the window", 99: "seat 99 by the window"}


def write_scene(
    folder: Path,
    old_url: str,
    new_url: str,
    env: dict[str, str | None] | None = None,
    records: int = RECORDS,
) -> None:
    """The configuration, the archive and the labelled queries in ``folder``, and the archive's
    turns embedded by the old model (the backfill run with ``env``: the Prefect API)."""
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
            for n in range(records)
        )
    )
    (folder / "q.jsonl").write_text(
        "".join(
            json.dumps({"query": text, "user_id": "ann", "relevant_ids": [f"s{n}#0"]}) + "\n"
            for n, text in QUESTIONS.items()
        )
    )
    done = invoke("backfill", "a.jsonl", "--user-id", "ann", "--embed", cwd=folder, env=env)
    assert done.exit_code == 0, done.output


def healthy(old: FakeOpenAI, new: FakeOpenAI) -> None:
    old.responder = lambda body: embeddings(body, 32)
    new.responder = rotated(32)


def set_scene(
    folder: Path,
    old: FakeOpenAI,
    old_url: str,
    new: FakeOpenAI,
    new_url: str,
    env: dict[str, str | None] | None = None,
) -> threading.Event:
    """The scene written, and the new endpoint slowed and set to make the old one refuse its
    model at the move's second batch; returns the event set then."""
    healthy(old, new)
    write_scene(folder, old_url, new_url, env)
    gone = threading.Event()
    turned, batches = rotated(32), []

    def new_model(body: dict[str, Any]) -> Answer:
        if len(body["input"]) == BATCH:
            batches.append(1)
            if len(batches) == 2:
                old.responder = lambda _: refused("old-embed")
                gone.set()
        answer = turned(body)
        answer.delay = 0.5
        return answer

    new.responder = new_model
    return gone


def search_through_bridge(folder: Path) -> list[dict[str, Any]]:
    """Each question searched (in this process, beside the move's): each must be answered."""
    answers = []
    for question in QUESTIONS.values():
        done = invoke(
            "search",
            question,
            "--user-id",
            "ann",
            "--source",
            "stm",
            "--mode",
            "semantic",
            "--json",
            cwd=folder,
        )
        assert done.exit_code == 0, done.output
        answers.append({**json.loads(done.stdout), "stderr": done.stderr})
    return answers


def check_answers(answers: list[dict[str, Any]]) -> None:
    for answer, n in zip(answers, QUESTIONS, strict=True):
        assert answer["bridge"]["query_model"] == NEW, "answered through the bridge"
        assert "old-embed" in answer["bridge"]["reason"]
        assert "warning: stm: answered through the bridge" in answer["stderr"], "never silently"
        assert answer["hits"][0]["id"] == f"s{n}#0", "and it finds what was asked"


def check_moved(summary: dict[str, Any]) -> None:
    assert summary["switched"], summary
    gate = summary["gate"]
    assert gate["passed"]
    assert gate["old_bridged"] == len(QUESTIONS), "the old side measured through the bridge"
    assert gate["old_recall"] == gate["new_recall"] == 1.0
    assert [b["query_model"] for b in summary["bridges"]] == [NEW]
