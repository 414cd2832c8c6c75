"""Fixtures the end-to-end tests share."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import prefect_server_process


@pytest.fixture(scope="module")
def ops_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real Prefect server on a free port, with its own home and database, as ops run one."""
    with prefect_server_process(tmp_path_factory.mktemp("prefect-home")) as env:
        yield env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No Prefect API, a Prefect home of the test's own: where mempipe's session server starts."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    environment.pop("MEMPIPE_SERVER_MODE", None)
    return {
        **environment,
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "MEMPIPE_SERVER_IDLE_SECONDS": "120",
    }
