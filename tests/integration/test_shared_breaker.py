"""A provider's breaker is shared by the processes of a run where a Prefect API is present
(issue 38): once one process's breaker opens, another process of the same run (a Dask worker)
sends nothing more to that provider; a process of another run still does."""

from __future__ import annotations

import pytest
from prefect import flow

from mempipe.adapters.llm import guard
from mempipe.adapters.llm.openai_compat import OpenAIExtractor
from mempipe.domain.failures import EnvironmentalError, FailureKind
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import LLMSettings
from tests.fakes.openai_server import error, fake_openai, memories
from tests.helpers import AIRPORT_FACT, AIRPORT_SNAPSHOT

pytestmark = pytest.mark.prefect


def extract(url: str) -> None:
    settings = LLMSettings(base_url=url, model="fake-model", api_key="k", timeout_seconds=5)
    OpenAIExtractor(settings).extract(AIRPORT_SNAPSHOT, MemoryType.SEMANTIC)


@flow
def one_run(url: str, failures: int) -> list[str]:
    """Each call as if in a process of its own (its breakers not yet made), in one run."""
    outcomes = []
    for _ in range(failures):
        guard._breakers.clear()  # another process of the run: its own registry
        try:
            extract(url)
            outcomes.append("answered")
        except EnvironmentalError as exc:
            outcomes.append(str(exc.kind))
    return outcomes


def test_an_open_breaker_stops_the_runs_other_processes_and_not_another_run(
    prefect_server, monkeypatch
) -> None:
    monkeypatch.setenv("MEMPIPE_RETRY_BREAKER_FAILURES", "1")
    with fake_openai() as (fake, url):
        fake.script = [error(401, "key revoked")]
        assert one_run(url, 3) == [
            FailureKind.CREDENTIALS,
            FailureKind.PROVIDER_DOWN,
            FailureKind.PROVIDER_DOWN,
        ]
        assert len(fake.requests) == 1, "the run's other processes sent nothing"

        fake.script = [memories(AIRPORT_FACT)]
        assert one_run(url, 1) == ["answered"], "another run tries again"


def test_the_runs_processes_count_failures_together(prefect_server, monkeypatch) -> None:
    """Issue 54: a provider that fails for each of three processes once opens the breaker of
    all of them, as three failures in one process's threads would; a success starts the count
    again."""
    monkeypatch.setenv("MEMPIPE_RETRY_BREAKER_FAILURES", "3")
    monkeypatch.setenv("MEMPIPE_RETRY_MAX_ATTEMPTS", "1")
    with fake_openai() as (fake, url):
        fake.script = [error(503, "overloaded")]
        assert one_run(url, 5) == [
            FailureKind.SERVER,
            FailureKind.SERVER,
            FailureKind.SERVER,
            FailureKind.PROVIDER_DOWN,
            FailureKind.PROVIDER_DOWN,
        ]
        assert len(fake.requests) == 3, "no process sent a fourth"

        fake.script = [error(503, "overloaded"), memories(AIRPORT_FACT), error(503, "overloaded")]
        outcomes = one_run(url, 5)
        assert outcomes[:2] == [FailureKind.SERVER, "answered"]
        assert FailureKind.PROVIDER_DOWN not in outcomes, "the success started the count again"
