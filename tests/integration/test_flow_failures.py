"""A job flow's failure on the Prefect server: one ``error:`` line as the run's own last log
line; a traceback with it only where mempipe did not raise the error on purpose (a bug's, a
library's), where ops need it to find the line that broke."""

from __future__ import annotations

import asyncio
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import LogFilter
from prefect.logging.handlers import APILogWorker

from mempipe.errors import ConfigError
from mempipe.flows.hooks import job_flow

pytestmark = pytest.mark.prefect


@job_flow("failing-on-purpose")
def refused() -> None:
    raise ConfigError("no model named 'nosuch'")


@job_flow("failing-by-a-bug")
def broken() -> None:
    {}["absent"]


def error_logs(run_id: UUID) -> list[str]:
    """The run's ERROR lines as the server keeps them."""
    APILogWorker.drain_all()

    async def read() -> list[str]:
        async with get_client() as client:
            logs = await client.read_logs(LogFilter(flow_run_id={"any_": [run_id]}))
        return [log.message for log in logs if log.level >= 40]

    return asyncio.run(read())


@pytest.mark.parametrize(
    ("body", "line", "traceback"),
    [
        (refused, "error: no model named 'nosuch'", False),
        (broken, "error: KeyError: 'absent'", True),
    ],
)
def test_a_bug_s_traceback_reaches_the_server_and_a_refusal_s_does_not(
    logs_to_api, body, line, traceback
) -> None:
    state = body(return_state=True)
    assert state.is_failed()
    assert state.message == line
    logged = error_logs(state.state_details.flow_run_id)
    (said,) = [message for message in logged if message.startswith(line)]
    assert ("Traceback (most recent call last)" in said) is traceback
    assert said.splitlines()[0] == line
