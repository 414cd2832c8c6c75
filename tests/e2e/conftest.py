"""Fixtures the end-to-end tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.processes import prefect_server_process


@pytest.fixture(scope="module")
def ops_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real Prefect server on a free port, with its own home and database, as ops run one."""
    with prefect_server_process(tmp_path_factory.mktemp("prefect-home")) as env:
        yield env
