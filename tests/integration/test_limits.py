"""Locks and limits: two re-embeds of one store never overlap (the store's own lock, held by a
live run), another store is not held back, a dead holder is closed at once; provider requests
draw on a named Prefect rate limit."""

from __future__ import annotations

import math
import time
from contextlib import closing
from datetime import UTC, datetime, timedelta

import pytest

from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.adapters.store import open_store
from mempipe.bootstrap import prepare_store
from mempipe.domain.failures import EnvironmentalError, FailureKind
from mempipe.domain.liveness import machine_id
from mempipe.errors import ConfigError, JobBusyError
from mempipe.flows.reembed import reembed_flow, reembed_rollback_flow
from mempipe.locks import store_lock
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.run import RunRecord, RunStatus
from tests.fakes.openai_server import fake_openai, memories
from tests.helpers import AIRPORT_FACT, AIRPORT_SNAPSHOT

pytestmark = pytest.mark.prefect


def holder_run(store_url: str, run_id: str, pid: int) -> None:
    now = datetime.now(UTC)
    with closing(open_store(store_url, migrate=True)) as store:
        store.start_run(
            RunRecord(
                run_id=run_id,
                flow="reembed",
                started_at=now,
                heartbeat_at=now,
                host="this-box",
                pid=pid,
                machine=machine_id(),
            )
        )


def test_a_second_reembed_of_one_store_waits_then_fails_naming_the_holder(
    prefect_server, store_url, tmp_path
) -> None:
    import os

    holder_run(store_url, "holder", os.getpid())
    with store_lock(store_url, "reembed", "holder", wait_s=5) as held:
        assert held == "reembed"
        with pytest.raises(
            JobBusyError, match=r"another reembed of .* reembed run holder on this-box \(pid \d+\)"
        ):
            reembed_flow(model="hashing-32", store=store_url, lock_wait_s=1)
        with pytest.raises(JobBusyError):
            reembed_rollback_flow(store=store_url, lock_wait_s=0.5)
        other = f"sqlite:///{tmp_path / 'other.db'}"
        prepare_store(other, None, create=True)
        assert reembed_flow(model="hashing-32", store=other, lock_wait_s=1).switched
    assert reembed_flow(model="hashing-32", store=store_url, lock_wait_s=1).switched, (
        "free once the first one ended"
    )


def test_a_lock_whose_holder_process_is_gone_is_taken_at_once(prefect_server, store_url) -> None:
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    holder_run(store_url, "dead", gone.pid)
    with closing(open_store(store_url, migrate=True)) as store:
        assert store.acquire_lease("reembed", "dead", timedelta(hours=1)) is None
    summary = reembed_flow(model="hashing-32", store=store_url, lock_wait_s=0)
    assert summary.switched
    with closing(open_store(store_url, migrate=True)) as store:
        dead = store.get_run("dead")
    assert dead is not None
    assert dead.status is RunStatus.FAILED
    assert "is gone" in (dead.error or "")


def test_provider_requests_draw_on_a_prefect_rate_limit_where_one_is_named(prefect_server) -> None:
    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(
            GlobalConcurrencyLimitCreate(name="llm-test", limit=10, slot_decay_per_second=0.01)
        )
    with fake_openai() as (fake, url):
        fake.script = [memories(AIRPORT_FACT)]
        settings = LLMSettings(base_url=url, model="m", api_key="k", rate_limit="llm-test")
        extractor = OpenAIExtractor(settings)
        for _ in range(3):
            extractor.extract(AIRPORT_SNAPSHOT, MemoryType.SEMANTIC)
        with pytest.raises(ConfigError, match="prefect gcl create no-such-limit"):
            OpenAIExtractor(settings.model_copy(update={"rate_limit": "no-such-limit"}))
    with get_client(sync_client=True) as client:
        used = client.read_global_concurrency_limit_by_name("llm-test").active_slots
    assert used >= 2, "each request took a slot (decaying slowly)"
    assert len(fake.requests) == 3, "the refused one never reached the provider"


def test_a_rate_limit_slot_that_does_not_come_within_the_call_timeout_is_a_rate_limit_failure(
    prefect_server,
) -> None:
    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(
            GlobalConcurrencyLimitCreate(name="llm-full", limit=1, slot_decay_per_second=0.001)
        )
    with fake_openai() as (fake, url):
        fake.script = [memories(AIRPORT_FACT)]
        settings = LLMSettings(
            base_url=url, model="m", api_key="k", rate_limit="llm-full", timeout_seconds=15
        )  # the first slot within 15 s from a test server four workers share; the second never
        extractor = OpenAIExtractor(settings)
        extractor.extract(AIRPORT_SNAPSHOT, MemoryType.SEMANTIC)
        started = time.monotonic()
        with pytest.raises(EnvironmentalError, match="no slot of Prefect rate limit") as caught:
            extractor.extract(AIRPORT_SNAPSHOT, MemoryType.SEMANTIC)
    assert caught.value.kind is FailureKind.RATE_LIMIT
    assert time.monotonic() - started < 45, "no wait without end"
    assert len(fake.requests) == 1


def test_a_429_costs_budget_like_any_request_and_its_retry_draws_again(prefect_server) -> None:
    """Under a tokens-per-minute budget on the Prefect server, an embeddings request answered
    429 and its retry each take their tokens from the server's token limit: the retry does not
    race the budget."""
    from prefect import get_client

    from mempipe.adapters.embedding.openai_compat import OpenAIEmbedder
    from mempipe.adapters.llm.ratelimit import budget_names
    from mempipe.adapters.llm.tokens import embedding_counter
    from mempipe.domain.failures import RetryPolicy
    from tests.fakes.openai_server import embeddings, error

    texts = ["my home airport is Lisbon", "I prefer aisle seats on short flights"]
    tokens = sum(embedding_counter("openai:budget-embed:8").count(texts))
    for attempt in range(3):  # conclusive only when read within a refill's time: a busy
        # machine's seconds between the first draw and the read may refill one attempt
        with fake_openai() as (fake, url):
            fake.script = [
                error(429, "slow down", retry_after="0"),
                embeddings({"input": texts}, 8),
            ]
            # The burst (a tenth of the minute) holds both attempts exactly, and refills slowest
            settings = LLMSettings(base_url=url, api_key="k", tokens_per_minute=20 * tokens)
            embedder = OpenAIEmbedder(f"budget-embed-{attempt}", 8, settings)
            started = time.monotonic()
            policy = RetryPolicy(max_attempts=2, max_seconds=10, rate_limit_default=0)
            vectors = policy.run(lambda embedder=embedder: embedder.embed(texts))
            _, token_limit = budget_names(str(embedder._client.base_url), embedder.model)
            with get_client(sync_client=True) as client:  # at once: the slots decay meanwhile
                limit = client.read_global_concurrency_limit_by_name(token_limit)
            refilled = math.ceil(limit.slot_decay_per_second * (time.monotonic() - started))
            assert len(vectors) == 2
            assert len(fake.requests) == 2
        assert limit.limit == 2 * tokens, "a tenth of the minute's budget at once"
        assert limit.slot_decay_per_second == pytest.approx(18 * tokens / 60)
        if 2 * tokens - refilled > tokens:  # the check below tells one attempt from two
            assert limit.active_slots >= 2 * tokens - refilled, "both attempts paid their tokens"
            return
    pytest.fail("three tries each took longer than a refill of one attempt: inconclusive")


def test_a_budget_another_process_made_first_is_taken_as_it_is(prefect_server, monkeypatch) -> None:
    """Two commands start at once with the same budget: the one that read "not there" before the
    other made it creates it second, which the server refuses (409: its name is unique, and the
    server logs the constraint's traceback). The budget is there, so the command goes on with
    it."""
    from prefect import get_client
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectNotFound

    from mempipe.adapters.llm.ratelimit import budget_figures, ensure_budget_limit

    name = f"mempipe-race-{time.time_ns()}"
    size, decay = budget_figures(600)
    with get_client(sync_client=True) as client:
        made = GlobalConcurrencyLimitCreate(name=name, limit=size, slot_decay_per_second=decay)
        client.create_global_concurrency_limit(made)
    read = SyncPrefectClient.read_global_concurrency_limit_by_name
    reads: list[str] = []

    def read_before_the_other_made_it(self, limit_name: str):
        reads.append(limit_name)
        if len(reads) == 1:
            raise ObjectNotFound(http_exc=Exception("not there yet"))
        return read(self, limit_name)

    monkeypatch.setattr(
        SyncPrefectClient, "read_global_concurrency_limit_by_name", read_before_the_other_made_it
    )
    assert ensure_budget_limit(name, 600) == size
    assert len(reads) >= 2, "the create raced and the budget was read again"
