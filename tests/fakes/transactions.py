"""Sessions and multi-document transactions for the mongomock fake, as strict as a replica set
where the adapter depends on it (mongomock has no sessions at all).

- A transaction commits all of its writes or none: the data is restored when it aborts.
- The first write error inside a transaction aborts it, whatever ``ordered`` says (MongoDB
  documentation, "Transactions and operations": write errors abort the transaction); every
  later operation in it answers ``NoSuchTransaction`` (code 251, ``TransientTransactionError``),
  as does its commit.
- A transaction may modify at most ``MAX_WRITES`` documents: the stand-in for the server's
  60-second ``transactionLifetimeLimitSeconds`` and the documented advice to keep transactions
  well under 1,000 modified documents. Past it the transaction is aborted.

Not modelled: read isolation between concurrent transactions, write conflicts, retries.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mongomock
from pymongo.errors import OperationFailure, PyMongoError
from pymongo.results import (
    BulkWriteResult,
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)

MAX_WRITES = 1000
NO_SUCH_TRANSACTION = 251
WRITES = (
    "insert_one",
    "insert_many",
    "update_one",
    "update_many",
    "replace_one",
    "delete_one",
    "delete_many",
    "bulk_write",
    "find_one_and_update",
)
READS = ("find", "find_one", "count_documents", "aggregate", "distinct")


def aborted(message: str) -> OperationFailure:
    return OperationFailure(
        message,
        code=NO_SUCH_TRANSACTION,
        details={"errmsg": message, "errorLabels": ["TransientTransactionError"]},
    )


class FakeSession:
    def __init__(self, client: TransactionalClient) -> None:
        self.client = client
        self.active = False
        self.aborted: str | None = None
        self.writes = 0
        self._saved: Any = None

    def __enter__(self) -> FakeSession:
        return self

    def __exit__(self, *_: Any) -> None:
        return None

    def end_session(self) -> None:
        return None

    @contextmanager
    def start_transaction(self) -> Iterator[None]:
        self._saved = self.client.save()
        self.active, self.aborted, self.writes = True, None, 0
        try:
            yield
        except BaseException:
            self.client.restore(self._saved)
            raise
        else:
            if self.aborted and self.active:
                self.client.restore(self._saved)
                raise aborted(f"commit of an aborted transaction: {self.aborted}")
        finally:
            self.active = False
            self.client.transactions_run += 1
            self.client.largest_transaction = max(self.client.largest_transaction, self.writes)

    def abort_transaction(self) -> None:
        """Undo the transaction's writes; its block then ends without a commit."""
        self.client.restore(self._saved)
        self.active, self.aborted = False, "aborted by the caller"

    def check(self) -> None:
        if self.aborted:
            raise aborted(f"Transaction has been aborted: {self.aborted}")

    def count(self, result: Any) -> None:
        self.writes += modified(result)
        if self.writes > MAX_WRITES:
            self.aborted = f"more than {MAX_WRITES} documents modified in one transaction"
            raise OperationFailure(
                f"Transaction exceeded its lifetime: {self.aborted}",
                code=NO_SUCH_TRANSACTION,
                details={"errorLabels": ["TransientTransactionError"]},
            )


def modified(result: Any) -> int:
    if isinstance(result, InsertOneResult):
        return 1
    if isinstance(result, InsertManyResult):
        return len(result.inserted_ids)
    if isinstance(result, UpdateResult):
        return result.modified_count + (result.upserted_id is not None)
    if isinstance(result, DeleteResult):
        return result.deleted_count
    if isinstance(result, BulkWriteResult):
        return (
            result.inserted_count
            + result.modified_count
            + result.deleted_count
            + result.upserted_count
        )
    return 0 if result is None else 1


def _in_session(method: Any, write: bool) -> Any:
    def wrapper(self: mongomock.Collection, *args: Any, session: Any = None, **kwargs: Any) -> Any:
        if not isinstance(session, FakeSession) or not session.active:
            return method(self, *args, **kwargs)
        session.check()
        try:
            result = method(self, *args, **kwargs)
        except PyMongoError as exc:
            if write:
                session.aborted = f"{type(exc).__name__}: {exc}"
            raise
        if write:
            session.count(result)
        return result

    return wrapper


def install() -> None:
    if getattr(mongomock.Collection, "_transactions_fake", False):
        return
    for name in WRITES:
        setattr(mongomock.Collection, name, _in_session(getattr(mongomock.Collection, name), True))
    for name in READS:
        setattr(mongomock.Collection, name, _in_session(getattr(mongomock.Collection, name), False))
    mongomock.Collection._transactions_fake = True


class _Admin:
    """The admin database as a replica-set member answers ``hello``."""

    def __init__(self, database: Any) -> None:
        self._database = database

    def command(self, name: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if name == "hello":
            return {"isWritablePrimary": True, "setName": "fake-rs", "ok": 1.0}
        return self._database.command(name, *args, **kwargs)


class TransactionalClient(mongomock.MongoClient):
    """A mongomock client whose sessions run transactions (see the module docstring), and
    that says it is a replica set, so the adapter uses them."""

    transactions_run = 0
    largest_transaction = 0

    def get_database(self, name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        database = super().get_database(name, *args, **kwargs)
        return _Admin(database) if name == "admin" else database

    def start_session(self, *_: Any, **__: Any) -> FakeSession:  # type: ignore[override]
        return FakeSession(self)

    def save(self) -> dict[tuple[str, str], Any]:
        return {
            (db, name): copy.deepcopy(collection._documents)
            for db, database in self._store._databases.items()
            for name, collection in database._collections.items()
        }

    def restore(self, saved: dict[tuple[str, str], Any]) -> None:
        for db, database in self._store._databases.items():
            for name, collection in database._collections.items():
                if (db, name) in saved:
                    collection._documents = saved[(db, name)]
                else:
                    collection._documents.clear()
