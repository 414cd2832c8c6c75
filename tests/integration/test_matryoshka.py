"""A Matryoshka model's smaller size cut from the vectors the store holds: ``reembed
--dimensions N`` on such a model sends no request, writes vectors equal to what the provider
returns for ``dimensions=N`` (the fake endpoint computes both, as OpenAI's text-embedding-3-*
do), and is a blue/green move like any other: the recall gate, the atomic switch, rollback. A
model not declared Matryoshka is refused, with the reason."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.cli import cli
from mempipe.errors import ConfigError
from mempipe.flows.backfill import backfill_flow
from mempipe.flows.reembed import reembed_flow, reembed_rollback_flow
from mempipe.schemas.bundle import BundleSelection
from tests.fakes.openai_server import fake_openai, matryoshka

pytestmark = pytest.mark.prefect
FULL, CUT = "openai:mtest:384", "openai:mtest"


def text(n: int) -> str:
    return f"Turn {n}: a window seat on flight {n * 7} to city {n % 5}."


def stored_vectors(store: str, model: str) -> dict[str, list[float]]:
    with unit_of_work(store) as uow:
        page, _ = uow.transfer.export_vectors("turns", model, BundleSelection(), None, 1000)
    return dict(page)


@pytest.fixture
def served(prefect_server, tmp_path, monkeypatch):
    """40 turns served by the full-size model, through the fake; the fake, its URL, the
    store and the configuration (the model declared Matryoshka)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "project-config.yaml").write_text(
        "memory:\n  embedding:\n    model: hashing-64\n    options:\n"
        f"      {CUT}:\n        matryoshka: true\n"
    )
    (tmp_path / "queries.jsonl").write_text(
        "".join(
            json.dumps({"query": text(n), "relevant_ids": [f"t{n}"]}) + "\n"
            for n in range(0, 40, 4)
        )
    )
    archive = tmp_path / "a.jsonl"
    archive.write_text(
        "".join(
            json.dumps(
                {
                    "session_id": f"s{n}",
                    "message_id": f"t{n}",
                    "role": "user",
                    "content": text(n),
                    "created_at": "2024-01-01T00:00:00Z",
                }
            )
            + "\n"
            for n in range(40)
        )
    )
    store, config = f"sqlite:///{tmp_path / 'm.db'}", str(tmp_path / "project-config.yaml")
    with fake_openai() as (fake, url):
        monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-matryoshka-fake")
        fake.responder = matryoshka(384)
        backfill_flow(paths=[str(archive)], store=store, config=config, user_id="ann")
        reembed_flow(model=FULL, collections=["stm"], store=store, config=config)
        yield fake, store, config


def test_a_smaller_size_is_cut_from_the_stored_vectors_without_a_request(served) -> None:
    fake, store, config = served
    sent = len(fake.requests)
    planned = CliRunner().invoke(
        cli,
        [
            "reembed",
            "--model",
            CUT,
            "--dimensions",
            "128",
            "--collections",
            "stm",
            "--plan",
            "--json",
            "--store",
            store,
            "--config",
            config,
        ],
    )
    assert planned.exit_code == 0, planned.stderr
    lines = json.loads(planned.stdout)["lines"]
    assert [(line["purpose"], line["requests"], line["items"]) for line in lines] == [
        ("cut stm", 0, 40)
    ]

    summary = reembed_flow(
        model=CUT,
        dimensions=128,
        collections=["stm"],
        gate="queries.jsonl",
        gate_source="stm",
        min_recall_ratio=0.5,
        store=store,
        config=config,
    )
    gate_queries = {text(n) for n in range(0, 40, 4)}
    since = fake.requests[sent:]
    assert [r["dimensions"] for r in since] == [384, 128], "the gate's queries, by each model"
    assert all(set(r["input"]) <= gate_queries for r in since), "no record's text, no probe"
    assert summary.model == "openai:mtest:128"
    assert summary.switched
    assert summary.gate is not None
    assert summary.gate.passed
    assert summary.collections[0].embedded_now == 40

    cut = stored_vectors(store, "openai:mtest:128")
    assert len(cut) == 40
    for ref, vector in cut.items():
        n = int(ref.split("\x1f")[3].removeprefix("s"))
        answer = matryoshka(384)({"input": [text(n)], "dimensions": 128}).body
        assert answer is not None
        np.testing.assert_allclose(vector, answer["data"][0]["embedding"], atol=1e-6)

    assert reembed_rollback_flow(store=store, config=config) == ["stm"]
    with unit_of_work(store) as uow:
        assert uow.models.serving_model("stm") == FULL


def test_a_model_not_declared_matryoshka_is_refused_with_the_reason(served, tmp_path) -> None:
    _, store, config = served
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    with pytest.raises(ConfigError, match="openai:mtest:128 is not a cut of openai:mtest:384"):
        reembed_flow(model=CUT, dimensions=128, collections=["stm"], store=store, config=config)
    with unit_of_work(store) as uow:
        assert uow.models.serving_model("stm") == FULL
        assert [e.model_id for e in uow.models.registry()] == [FULL]
