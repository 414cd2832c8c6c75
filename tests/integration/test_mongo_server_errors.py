"""What a real MongoDB server answers that mongomock does not: no search engine, write-concern
errors, the 16 MiB document limit; told by error codes, not message text."""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime

import mongomock
import pytest
from pymongo.errors import BulkWriteError, OperationFailure

from mempipe.adapters.store.mongo.exceptions import (
    SearchUnavailableError,
    StoreUnavailableError,
    translate,
)
from mempipe.adapters.store.mongo.factory import open_mongo_store
from mempipe.schemas.turn import SourceLocation, Turn
from tests.fakes import atlas


@pytest.mark.parametrize("code", [31082, 115], ids=["SearchNotEnabled", "CommandNotSupported"])
def test_a_deployment_without_a_search_engine_is_told_by_its_code_and_refuses_search_only(
    monkeypatch, code
) -> None:
    client = atlas.client()

    def no_search(self, *args, **kwargs):
        raise OperationFailure("Using Atlas Search requires additional configuration", code=code)

    monkeypatch.setattr(mongomock.Collection, "list_search_indexes", no_search)
    store = open_mongo_store("mongodb://community/db", client=client)
    assert store.capabilities.search is False, "opened: the jobs that need no search can run"
    with pytest.raises(SearchUnavailableError, match=": search needs search indexes"):
        store.require_search("search")


def test_a_deployment_with_search_reports_it() -> None:
    store = open_mongo_store("mongodb://atlas/db", client=atlas.client())
    assert store.capabilities.search is True
    store.require_search("search")


def test_search_errors_are_told_by_code_not_by_message_text() -> None:
    named = OperationFailure("$search failed: a field is not indexed as token", code=8)
    assert not isinstance(translate(named, "here"), SearchUnavailableError)
    assert isinstance(translate(OperationFailure("x", code=31082), "here"), SearchUnavailableError)
    unknown = OperationFailure("Unrecognized pipeline stage name: '$vectorSearch'", code=40324)
    assert isinstance(translate(unknown, "here"), SearchUnavailableError)


def turn(seq: int, content: str) -> Turn:
    return Turn(
        org_id="o",
        project_id="p",
        user_id="u",
        session_id="s",
        turn_seq=seq,
        role="user",
        content=content,
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        source=SourceLocation(path="big.jsonl", line=seq + 1),
    )


def test_a_write_concern_error_is_not_counted_as_success(mongo, monkeypatch) -> None:
    """``w: majority`` not satisfied in time: the writes may not be durable. pymongo reports it
    in the BulkWriteError's ``writeConcernErrors``, with no write error at all."""

    def unacknowledged(self, requests, *args, **kwargs):
        raise BulkWriteError(
            {
                "writeErrors": [],
                "writeConcernErrors": [{"code": 64, "errmsg": "waiting for replication timed out"}],
                "nInserted": len(requests),
            }
        )

    monkeypatch.setattr(mongomock.Collection, "bulk_write", unacknowledged)
    with pytest.raises(StoreUnavailableError, match="waiting for replication timed out"):
        mongo.add_turns([turn(0, "hello"), turn(1, "there")], "r")


def test_a_turn_over_16_mib_is_one_reject_and_the_batch_goes_in(mongo) -> None:
    huge = "x" * (17 * 1024 * 1024)
    result = mongo.add_turns([turn(0, "hello"), turn(1, huge), turn(2, "bye")], "r")
    assert result.inserted == 2
    [reject] = result.conflicts
    assert reject.line == 2
    assert "16 MiB" in reject.reason


def test_an_unreachable_server_fails_once_after_the_selection_timeout() -> None:
    from pymongo import MongoClient

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = MongoClient(f"mongodb://127.0.0.1:{port}", serverSelectionTimeoutMS=500)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        open_mongo_store(f"mongodb://127.0.0.1:{port}/memory", client=client)
    assert time.monotonic() - started < 1.5, "one selection timeout, not one per question"
