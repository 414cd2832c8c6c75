"""Live mode under a tokens-per-minute budget: two ``mempipe reembed`` processes at once
against one endpoint draw on the same Prefect global rate limits, and the fake endpoint never
sees more tokens in any 60 seconds than the budget."""

from __future__ import annotations

import json
import time

import bpe_openai
import pytest

from tests.fakes.openai_server import embeddings, fake_openai
from tests.helpers import copy_store, invoke, write_archive, write_config
from tests.processes import environment, start

pytestmark = pytest.mark.prefect
BUDGET = 14_000
MODEL = "openai:fake-embed:16"


@pytest.mark.process("two processes drawing on one budget")
def test_two_processes_under_one_token_budget_never_exceed_it(prefect_server, tmp_path) -> None:
    write_archive(tmp_path / "archive.jsonl", 100)
    config = write_config(tmp_path)
    base = ["--store", "sqlite:///base.db", "--config", str(config)]
    for step in (["backfill", "archive.jsonl"], ["replay"], ["reembed", "--incremental"]):
        done = invoke(*step, *base, cwd=tmp_path)
        assert done.exit_code == 0, done.stderr
    for name in ("a.db", "b.db"):
        copy_store(tmp_path / "base.db", tmp_path / name)
    encoding = bpe_openai.get_encoding("cl100k_base")
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 16)
        budget_env = environment(
            prefect_server,
            MEMPIPE_LLM_BASE_URL=url,
            OPENAI_API_KEY="test",
            MEMPIPE_LLM_TOKENS_PER_MINUTE=str(BUDGET),
        )
        started = time.monotonic()
        processes = [
            start(
                [
                    "reembed",
                    "--model",
                    MODEL,
                    "--collections",
                    "semantic",
                    "--batch-size",
                    "64",
                    "--store",
                    f"sqlite:///{tmp_path / name}",
                    "--config",
                    str(config),
                    "--json",
                ],
                tmp_path,
                budget_env,
            )
            for name in ("a.db", "b.db")
        ]
        results = [p.communicate(timeout=400) for p in processes]
        elapsed = time.monotonic() - started
    for process, (out, err) in zip(processes, results, strict=True):
        assert process.returncode == 0, err
        assert json.loads(out)["switched"] is True
    sent = [
        (at, sum(len(encoding.encode_ordinary(t)) for t in body["input"]))
        for at, body in zip(fake.request_times, fake.requests, strict=True)
    ]
    total = sum(tokens for _, tokens in sent)
    windows = [sum(n for at, n in sent if start <= at < start + 60) for start, _ in sent]
    print(f"{total} tokens in {elapsed:.0f} s; busiest minute {max(windows)} of {BUDGET}")
    assert total > BUDGET * 1.1, "the two runs need more than a minute's budget"
    assert max(windows) <= BUDGET, "no 60 seconds saw more tokens than the budget"
    assert elapsed > 60 * (total - BUDGET) / BUDGET, "the budget held them back"
