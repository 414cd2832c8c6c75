"""`runs cancel` while its run still submits: the run submits nothing after the cancel, and the
batch it created while the cancel listed the run's batches is cancelled too. Deterministic: the
cancel is asked from inside the stream of requests, between the first file and the second."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mempipe.adapters.llm.batches import OpenAIBatches
from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import RetryPolicy
from mempipe.schemas.batch import BatchLimits, BatchRequest
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.run import RunRecord
from mempipe.services.provider_batches import BatchWork, cancel_run
from tests.fakes.openai_server import fake_openai

ENDPOINT = "/v1/embeddings"


def requests(count: int, cancel_after: int, cancel: object) -> Iterator[BatchRequest]:
    """``count`` one-input requests; asks the cancel once ``cancel_after`` have been taken."""
    for n in range(count):
        if n == cancel_after:
            cancel()  # type: ignore[operator]
        yield BatchRequest(
            custom_id=f"r{n}", body={"model": "m", "input": [f"text {n}"]}, items=[n]
        )


def test_a_run_cancelled_while_it_submits_submits_no_more_and_cancels_the_one_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    store = open_store(url, migrate=True)
    store.start_run(RunRecord(run_id="move", flow="reembed", started_at=datetime.now(UTC)))
    with fake_openai() as (fake, base_url):
        fake.batches.delay = 3600
        monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        client = OpenAIBatches(LLMSettings(base_url=base_url, api_key="test"))
        work = BatchWork(
            UnitOfWork(store),
            client,
            run_id="move",
            job="reembed",
            scope="reembed:semantic:m",
            endpoint=ENDPOINT,
            limits=BatchLimits(max_requests=4),
            retry=RetryPolicy(max_attempts=1),
            sleep=lambda _: None,
        )
        asked: list[list[str]] = []
        # The fifth request closes the first file: the cancel comes after the first batch is
        # created and before the second is.
        stream = requests(
            20, 6, lambda: asked.append(cancel_run(UnitOfWork(store), "move").cancelled)
        )
        submitted = work.submit(stream)

        statuses = {b: fake.batches.batches[b]["status"] for b in fake.batches.batches}
    assert len(asked[0]) == 1, "the cancel found the one batch created before it"
    assert len(submitted) == 2, "the run made one more batch, then stopped submitting"
    assert set(statuses.values()) == {"cancelling"}, statuses
    assert sum(len(b.items) for b in submitted) == 8, "the other 12 requests were never sent"
