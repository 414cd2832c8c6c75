"""A data request's erase, on SQLite and on the MongoDB fake: afterwards no search in any mode,
source or filter finds the user's data, nothing of the user is left to export, the audit keeps
its rows with the user's text redacted in the store and in the Parquet files, other users'
records are untouched; a dry run changes nothing."""

from __future__ import annotations

import itertools
from pathlib import Path

import polars as pl
import pytest

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.bundle import BUNDLE_MODELS, REDACTED, BundleSelection
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.bundle_import import import_bundle
from mempipe.services.erase import erase_user
from mempipe.services.export import digest_collection, export_bundle
from mempipe.services.reembed.fill import embed_collection
from mempipe.services.report.audit import write_audit
from mempipe.services.search import search
from tests.stores import COLLECTIONS, EMBEDDER, target_store

MAYA = BundleSelection(user_id="maya")
BOB = BundleSelection(user_id="bob")
SOURCES = ["stm", "semantic", "episodic", "procedural", "taxonomic", "ticket"]
QUERIES = ["airport", "order 4411 refund", "Maya name", "Lisbon move", "deploy canary"]


@pytest.fixture(params=["sqlite", "mongomock"])
def store(request, source, tmp_path: Path):
    if request.param == "sqlite":
        yield source
        return
    export_bundle(UnitOfWork(source), tmp_path / "bundle", BundleSelection())
    target = target_store("mongomock", tmp_path)
    import_bundle(
        UnitOfWork(target), tmp_path / "bundle", run_id="imp", rejects_file=tmp_path / "r"
    )
    for collection in COLLECTIONS:
        embed_collection(
            UnitOfWork(target), collection, EMBEDDER, run_id="imp", batch_size=50, state="serving"
        )
    yield target
    target.close()


def digests(store, selection: BundleSelection) -> dict[str, str]:
    return {
        c: digest_collection(UnitOfWork(store), c, selection, 100).hexdigest()
        for c in BUNDLE_MODELS
    }


def found_of_maya(store) -> list[tuple]:
    """Every hit of maya's own data (org-visible shared memories are not hers to erase)."""
    scopes = [ReadFilter(user_id="maya"), ReadFilter(org_id="acme"), ReadFilter()]
    hits = []
    for source_name, mode, scope, query in itertools.product(SOURCES, SearchMode, scopes, QUERIES):
        result = search(UnitOfWork(store), lambda _: EMBEDDER, query, source_name, mode, scope, 50)
        hits += [
            (source_name, mode.value, h.id)
            for h in result.hits
            if h.user_id == "maya" and (h.visibility is None or h.visibility.value == "private")
        ]
    return hits


def test_after_an_erase_nothing_of_the_user_is_found_and_others_are_untouched(
    store, tmp_path
) -> None:
    audit_dir = tmp_path / "audit"
    write_audit(store.audit_rows(), audit_dir, store.store_id())
    before_bob, before_maya = digests(store, BOB), digests(store, MAYA)
    audit_rows = pl.read_parquet(audit_dir / "**" / "*.parquet").height
    assert found_of_maya(store), "maya's data is found before"

    dry = erase_user(UnitOfWork(store), MAYA, dry_run=True, audit_dirs=[audit_dir])
    assert dry.counts["turns"] == 20
    assert dry.counts["semantic"] > 0
    assert dry.counts["vectors"] > 0
    assert dry.audit_file_rows > 0
    assert digests(store, MAYA) == before_maya, "a dry run changes nothing"
    assert (
        pl.read_parquet(audit_dir / "**" / "*.parquet")
        .filter(pl.col("text") == REDACTED)
        .is_empty()
    )

    done = erase_user(UnitOfWork(store), MAYA, dry_run=False, audit_dirs=[audit_dir])

    assert done.counts == dry.counts
    assert found_of_maya(store) == []
    for collection in ("turns", "snapshots", "semantic", "episodic", "procedural", "custom"):
        assert store.export_page(collection, MAYA, None, 10)[0] == [], collection
    audit = [a for a in store.export_page("audit", MAYA, None, 1000)[0]]
    assert audit, "the audit keeps its rows"
    assert {a.text for a in audit} == {REDACTED}
    files = pl.read_parquet(audit_dir / "**" / "*.parquet")
    assert files.height == audit_rows
    assert set(files.filter(pl.col("user_id") == "maya")["text"]) == {REDACTED}
    assert digests(store, BOB) == before_bob, "other users unchanged"
    assert (
        erase_user(UnitOfWork(store), MAYA, dry_run=False, audit_dirs=[audit_dir]).counts["turns"]
        == 0
    )
