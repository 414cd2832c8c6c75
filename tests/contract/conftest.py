"""The store contract suite runs against every backend named in ``MEMPIPE_CONTRACT_BACKENDS``
(comma-separated; default ``sqlite``). A backend adds a factory here and passes the same tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mempipe.adapters.store import Store, open_store


def sqlite_store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'contract.db'}")


BACKENDS: dict[str, Callable[[Path], Store]] = {"sqlite": sqlite_store}
SELECTED = [b.strip() for b in os.environ.get("MEMPIPE_CONTRACT_BACKENDS", "sqlite").split(",")]


@pytest.fixture(params=SELECTED)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param not in BACKENDS:
        pytest.fail(f"no contract factory for backend {request.param!r}")
    store = BACKENDS[request.param](tmp_path)
    yield store
    store.close()
