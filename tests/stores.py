"""Stores built for tests, shared by their modules: the contract suite's backends and records,
a loaded and replayed store, another system's memories imported, the bundle source (a store of
every kind of record), a backfill flow run. No test module imports another: what two share is
here, or in ``tests/helpers.py``."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.llm.offline import OfflineExtractor
from mempipe.adapters.store import Store, open_store
from mempipe.adapters.store.factory import finish_opening
from mempipe.adapters.store.mongo.factory import open_mongo_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bootstrap import prepare_store
from mempipe.domain.promotion import cut_snapshots
from mempipe.flows.backfill import backfill_flow
from mempipe.schemas.config import CustomTypeConfig, PromotionLimits
from mempipe.schemas.failure import Failure, FailureClass
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.memory import CustomMemory, SemanticMemory
from mempipe.schemas.memory_import import MemoryFormat, MemoryImportRequest, MemoryImportSummary
from mempipe.schemas.run import RunRecord
from mempipe.schemas.turn import SourceLocation, Turn
from mempipe.schemas.work import WorkQuery
from mempipe.services.memory_import import import_memory_file
from mempipe.services.promote import promote_sessions
from mempipe.services.reembed.fill import embed_collection
from mempipe.services.replay.extract import ReplayContext, replay_one
from tests.fakes import atlas
from tests.fakes.memory_store import InMemoryStore
from tests.helpers import ingest, semantic_memory

ROOT = Path(__file__).parents[1]
T0 = datetime(2024, 1, 1, tzinfo=UTC)


MONGODB_URI = os.environ.get("MEMPIPE_MONGODB_URI")
SEARCH_SYNC_S = 2.0


def sqlite_store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'contract.db'}", migrate=True)


def mongomock_store(tmp_path: Path) -> Store:
    return finish_opening(open_mongo_store("mongodb://mongomock/contract", client=atlas.client()))


def atlas_strict_store(tmp_path: Path) -> Store:
    """The Atlas fake as strict as Atlas: a replica set with transactions, indexes that build,
    update and drop over time, search that lags writes (:func:`atlas.strict` is on)."""
    store = open_mongo_store("mongodb://mongomock/strict", client=atlas.client())
    store.search_indexes.poll_s = 0.02
    return finish_opening(store)


def mongodb_store(tmp_path: Path) -> Store:
    """A fresh database on the real server named by ``MEMPIPE_MONGODB_URI``."""
    if not MONGODB_URI:
        pytest.skip("MEMPIPE_MONGODB_URI is not set")
    base = MONGODB_URI.split("?")[0].rstrip("/")
    if base.count("/") > 2:
        base = base.rsplit("/", 1)[0]
    query = f"?{MONGODB_URI.split('?', 1)[1]}" if "?" in MONGODB_URI else ""
    return open_store(f"{base}/mempipe_contract_{uuid.uuid4().hex[:8]}{query}", migrate=True)


def secantus_store(uri: str) -> Store:
    """A fresh database on the session's SecantusDB server: the wire protocol, real sessions
    and transactions, no search."""
    return open_store(f"{uri}/contract_{uuid.uuid4().hex[:8]}?replicaSet=secantus", migrate=True)


def in_memory_store(tmp_path: Path) -> Store:
    """The in-memory fake the service tests run on: it implements the turns, work, memories
    and audit repositories, and the tests of those run on it too."""
    return InMemoryStore()  # type: ignore[return-value]


def turn(seq: int, session: str = "s", content: str | None = None, user: str = "u") -> Turn:
    return Turn(
        org_id="o",
        project_id="p",
        user_id=user,
        session_id=session,
        turn_seq=seq,
        role="user" if seq % 2 == 0 else "assistant",
        content=content or f"turn {seq}",
        created_at=T0 + timedelta(minutes=seq),
        source=SourceLocation(path="a.jsonl", line=seq + 1),
    )


def memory(memory_id: str, text: str, label: str, user: str = "u", **fields) -> SemanticMemory:
    return semantic_memory(memory_id, text, user, label=label, **fields)


def promote(store, handlers=("semantic",)) -> int:
    snapshots = list(
        cut_snapshots(
            store.iter_unpromoted_turns(),
            PromotionLimits(max_messages=2),
            handlers=handlers,
            run_id="r",
        )
    )
    return len(store.add_snapshots(snapshots))


SAMPLE = ROOT / "examples" / "sample-archive"
HANDLERS = ["semantic", "episodic", "procedural", "taxonomic"]


def load(store, tmp_path: Path, archive: Path = SAMPLE, user: str = "maya") -> None:
    for path in sorted(archive.iterdir()) if archive.is_dir() else [archive]:
        ingest(
            store,
            path,
            IdentityDefaults(org_id="acme", project_id="travel", user_id=user),
            tmp_path / "rejects.jsonl",
            run_id="backfill",
        )
    promote_sessions(UnitOfWork(store), PromotionLimits(), HANDLERS, run_id="backfill")


def replay_context(**overrides) -> ReplayContext:
    values = {"run_id": "run", "extractor": OfflineExtractor(), "embedder": HashingEmbedder(64)}
    return ReplayContext(**(values | overrides))


def replay_all(store, ctx: ReplayContext, handlers=HANDLERS):
    work = store.extraction_work(WorkQuery(handlers=handlers))
    return [replay_one(UnitOfWork(store), item, ctx) for item in work]


IMPORT_DEFAULTS = IdentityDefaults(org_id="acme", project_id="travel")


def import_context(**overrides) -> ReplayContext:
    values = {"run_id": "imp", "extractor": OfflineExtractor(), "embedder": HashingEmbedder(64)}
    return ReplayContext(**(values | overrides))


def imported(
    store,
    path,
    fmt: MemoryFormat,
    rejects,
    *,
    ctx: ReplayContext | None = None,
    **more,
) -> MemoryImportSummary:
    """One file of another system's memories imported into ``store``."""
    request = MemoryImportRequest(
        path=path, format=fmt, defaults=IMPORT_DEFAULTS, rejects_file=rejects, **more
    )
    return import_memory_file(UnitOfWork(store), request, ctx or import_context())


EMBEDDER = HashingEmbedder(64)
TICKET = CustomTypeConfig(name="ticket", tags={"priority": "string"})
AT = datetime(2024, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)
COLLECTIONS = ("stm", "semantic", "episodic", "procedural", "taxonomic", "custom")


def declared(store) -> None:
    store.declare(["engagement_id"], [TICKET])


def bundle_source(tmp_path: Path) -> Store:
    """A store holding turns, snapshots, every memory type with superseded versions,
    reinforcement, a custom type, a partition key, a run, audit and a failure, each collection
    embedded: what bundles, copies and erases are checked on."""
    url = f"sqlite:///{tmp_path / 'source.db'}"
    prepare_store(url, None, create=True)
    store = open_store(url, migrate=True)
    declared(store)
    load(store, tmp_path)
    load(store, tmp_path, user="bob")
    store.start_run(RunRecord(run_id="run", flow="replay", started_at=AT, counts={"x": 1}))
    replay_all(store, replay_context())
    with store.write_transaction():
        ticket = CustomMemory(
            id="t1",
            org_id="acme",
            project_id="travel",
            user_id="maya",
            text="Refund ticket for order 4411 is open",
            type_name="ticket",
            tags={"priority": "high"},
            metadata={"engagement_id": "e-7"},
            created_at=AT,
            updated_at=AT,
        )
        store.add_memory("custom", ticket, None)
        store.add_failure(
            Failure(
                run_id="run",
                step="extract:semantic",
                failure_class=FailureClass.CONTENT,
                error_type="schema",
                error="the reply was not JSON",
                attempts=1,
                org_id="acme",
                project_id="travel",
                at=AT,
            )
        )
    for collection in COLLECTIONS:
        embed_collection(
            UnitOfWork(store), collection, EMBEDDER, run_id="run", batch_size=50, state="serving"
        )
    return store


def target_store(kind: str, tmp_path: Path):
    if kind == "mongomock":
        store = mongomock_store(tmp_path)
    else:
        url = f"sqlite:///{tmp_path / 'target.db'}"
        prepare_store(url, None, create=True)
        store = open_store(url, migrate=True)
    declared(store)
    return store


def run_backfill(prefect_server, store_url, paths, tmp_path, **params):
    return backfill_flow(
        paths=[str(p) for p in paths],
        store=store_url,
        config=str(tmp_path / "project-config.yaml"),
        rejects_dir=str(tmp_path / "rejects"),
        org_id="acme",
        project_id="support",
        **params,
    )
