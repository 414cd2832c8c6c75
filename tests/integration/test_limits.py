"""Prefect global concurrency limits on a real (test) Prefect server: two re-embeds of one
store never overlap, another store is not held back; provider requests draw on a named Prefect
rate limit."""

from __future__ import annotations

import pytest

from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.adapters.store import open_store
from mempipe.errors import ConfigError
from mempipe.flows.reembed import reembed, reembed_rollback
from mempipe.limits import JobBusyError, exclusive, limit_name
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import LLMSettings
from tests.fakes.openai_server import fake_openai, memories
from tests.integration.test_llm_extractor import FACT, SNAPSHOT

pytestmark = pytest.mark.prefect


def test_a_second_reembed_of_one_store_waits_then_fails_naming_the_limit(
    prefect_server, store_url, tmp_path
) -> None:
    open_store(store_url).close()
    with exclusive("reembed", store_url, wait_s=5) as held:
        assert held == limit_name("reembed", store_url)
        with pytest.raises(
            JobBusyError, match=rf"another reembed of .*limit {held!r}\); waited 1 s"
        ):
            reembed(model="hashing-32", store=store_url, lock_wait_s=1)
        with pytest.raises(JobBusyError):
            reembed_rollback(store=store_url, lock_wait_s=0.5)
        other = f"sqlite:///{tmp_path / 'other.db'}"
        assert reembed(model="hashing-32", store=other, lock_wait_s=1).switched
    assert reembed(model="hashing-32", store=store_url, lock_wait_s=1).switched, (
        "free once the first one ended"
    )


def test_provider_requests_draw_on_a_prefect_rate_limit_where_one_is_named(prefect_server) -> None:
    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(
            GlobalConcurrencyLimitCreate(name="llm-test", limit=10, slot_decay_per_second=0.01)
        )
    with fake_openai() as (fake, url):
        fake.script = [memories(FACT)]
        settings = LLMSettings(base_url=url, model="m", api_key="k", rate_limit="llm-test")
        extractor = OpenAIExtractor(settings)
        for _ in range(3):
            extractor.extract(SNAPSHOT, MemoryType.SEMANTIC)
        missing = OpenAIExtractor(settings.model_copy(update={"rate_limit": "no-such-limit"}))
        with pytest.raises(ConfigError, match="prefect gcl create no-such-limit"):
            missing.extract(SNAPSHOT, MemoryType.SEMANTIC)
    with get_client(sync_client=True) as client:
        used = client.read_global_concurrency_limit_by_name("llm-test").active_slots
    assert used >= 2, "each request took a slot (decaying slowly)"
    assert len(fake.requests) == 3, "the refused one never reached the provider"
