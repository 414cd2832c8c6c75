"""``reembed --model NEW --preview``: a sample of the collection embedded with the new model
through the real ``openai`` client against the fake endpoint, nothing written (the store's
bytes unchanged), the spend shown equal to what the endpoint's answers reported and planned
beside it, and the gate predicted: exactly the full move's gate when the sample is the whole
collection."""

from __future__ import annotations

import hashlib
import json

import pytest

from mempipe.flows.reembed import reembed_flow
from tests.fakes.openai_server import embeddings, fake_openai, usage_of
from tests.helpers import invoke

pytestmark = pytest.mark.prefect
NEW = "openai:fake-embed:48"
USERS, TURNS = 4, 60
WORDS = ("seat", "window", "aisle", "flight", "hotel", "city")
WORDS += ("train", "museum", "dinner", "coffee", "lake", "bridge")


def text(user: int, n: int) -> str:
    return f"{WORDS[n % 12]} {WORDS[(n * 5 + user) % 12]} {WORDS[(n * 7) % 12]} note {n} of {user}"


@pytest.fixture
def served(prefect_server, tmp_path, monkeypatch):
    """240 turns of 4 users served by hashing-64, 12 labelled queries (a turn's words, its
    message id), the fake endpoint answering the new model."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    rows = [
        {
            "session_id": f"u{u}-s{n // 10}",
            "user_id": f"u{u}",
            "message_id": f"u{u}-m{n}",
            "role": "user",
            "content": text(u, n),
        }
        for u in range(USERS)
        for n in range(TURNS)
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "queries.jsonl").write_text(
        "".join(
            json.dumps({"query": text(u, n), "relevant_ids": [f"u{u}-m{n}"], "user_id": f"u{u}"})
            + "\n"
            for u in range(USERS)
            for n in (3, 17, 41)
        )
    )
    done = invoke("backfill", "a.jsonl", "--embed", cwd=tmp_path)
    assert done.exit_code == 0, done.output
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 48)
        monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", url)
        monkeypatch.setenv("MEMPIPE_LLM_API_KEY", "sk-preview-fake")
        yield fake, tmp_path


def preview(cwd, *more: str):
    done = invoke(
        "reembed", "--model", NEW, "--collections", "stm", "--preview", "--json", *more, cwd=cwd
    )
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_a_preview_writes_nothing_and_reports_what_the_endpoint_counted(served) -> None:
    fake, folder = served
    before = hashlib.sha256((folder / "mempipe.db").read_bytes()).hexdigest()

    found = preview(
        folder, "--sample", "40", "--gate", "queries.jsonl", "--gate-source", "stm", "--html"
    )

    assert hashlib.sha256((folder / "mempipe.db").read_bytes()).hexdigest() == before
    (stm,) = found["collections"]
    assert (stm["records"], stm["sampled"], stm["serving_model"]) == (240, 52, "hashing-64")
    assert 0 <= stm["neighbour_agreement"] <= 1
    sample_inputs = [t for body in fake.requests[:-1] for t in body["input"]]
    assert len(sample_inputs) == 52, "the 40 drawn and the 12 the queries name, and no more"
    (spent,) = found["spent"]
    reported = [usage_of(body) for body in fake.requests]
    assert spent["requests"] == len(fake.requests)
    assert spent["input_tokens"] == sum(u["prompt_tokens"] for u in reported if u)
    planned = [line for line in found["sample_plan"]["lines"] if line["model"] == NEW]
    assert [line["purpose"] for line in planned] == [
        "embed the sample",
        f"embed the gate's queries ({NEW})",
    ]
    assert sum(line["input_tokens"] for line in planned) == spent["input_tokens"]
    assert sum(line["requests"] for line in planned) == spent["requests"]
    page = (folder / found["html"]).read_text()
    assert "would not switch" in page or "would switch" in page
    assert text(0, 3) not in page, "a page of figures: no record's text"


def test_a_sample_of_the_whole_collection_predicts_the_gate_exactly(served) -> None:
    _, folder = served
    found = preview(folder, "--sample", "1000", "--gate", "queries.jsonl", "--gate-source", "stm")
    predicted = found["gate"]
    assert predicted["old_recall_from_sample"] == predicted["old_recall"]

    moved = reembed_flow(
        model=NEW, collections=["stm"], gate="queries.jsonl", gate_source="stm", min_recall_ratio=0
    )

    assert moved.gate is not None
    assert (predicted["old_recall"], predicted["new_recall"], predicted["ratio"]) == (
        moved.gate.old_recall,
        moved.gate.new_recall,
        moved.gate.ratio,
    )


def test_a_provider_that_fails_the_sample_fails_the_preview_and_says_why(
    served, monkeypatch
) -> None:
    from tests.fakes.openai_server import error

    fake, folder = served
    fake.responder = lambda body: error(500, "internal error")
    monkeypatch.setenv("MEMPIPE_RETRY_MAX_ATTEMPTS", "1")
    before = hashlib.sha256((folder / "mempipe.db").read_bytes()).hexdigest()

    done = invoke(
        "reembed",
        "--model",
        NEW,
        "--collections",
        "stm",
        "--preview",
        "--sample",
        "300",
        "--json",
        cwd=folder,
    )

    assert done.exit_code == 1, done.output
    document = json.loads(done.stdout)
    assert document["kind"] == "incomplete"
    (stm,) = document["collections"]
    assert stm["failed"] == 240, "nothing more is sent after the batch the provider failed"
    assert "internal error" in (stm["provider_error"] or "")
    assert len(fake.requests) == 1
    assert hashlib.sha256((folder / "mempipe.db").read_bytes()).hexdigest() == before
