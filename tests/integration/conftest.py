"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mempipe.adapters.store.factory import finish_opening
from mempipe.adapters.store.mongo.client import MongoStore
from mempipe.adapters.store.mongo.factory import open_mongo_store
from tests.fakes import atlas


@pytest.fixture
def mongo() -> Iterator[MongoStore]:
    """A MongoDB store on the Atlas fake, polling its indexes often."""
    opened = finish_opening(
        open_mongo_store("mongodb://mongomock/lifecycle", client=atlas.client())
    )
    assert isinstance(opened, MongoStore)
    opened.search_indexes.poll_s = 0.05
    yield opened
    opened.close()
