"""Bundles: a store holding turns, snapshots, every memory type with superseded versions,
reinforcement, a custom type, a partition key, audit and failures is exported, imported into a
new SQLite store and into the MongoDB fake, and exported again with the same digests; the same
searches find the same ids; a second import writes nothing; a record held with other content
is rejected, never overwritten."""

from __future__ import annotations

import json

import pytest

from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bootstrap import prepare_store
from mempipe.schemas.bundle import BundleSelection
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.bundle_import import import_bundle
from mempipe.services.export import export_bundle
from mempipe.services.reembed.fill import embed_collection
from mempipe.services.search import search
from tests.helpers import semantic_memory
from tests.stores import COLLECTIONS, EMBEDDER, target_store


def found(store) -> dict[tuple[str, str, str], list[str]]:
    """The ids each search finds: every mode, turns and memories, one user and the org."""
    results = {}
    for source in COLLECTIONS[:2]:
        for mode in SearchMode:
            for scope in (ReadFilter(user_id="maya"), ReadFilter(org_id="acme")):
                hits = search(
                    UnitOfWork(store), lambda _: EMBEDDER, "airport refund", source, mode, scope, 5
                )
                results[(source, mode.value, str(scope.user_id))] = [h.id for h in hits.hits]
    return results


@pytest.mark.parametrize("kind", ["sqlite", "mongomock"])
def test_a_store_round_trips_through_a_bundle_with_the_same_digests_and_searches(
    source, tmp_path, kind
) -> None:
    first = export_bundle(UnitOfWork(source), tmp_path / "bundle", BundleSelection())
    assert all(first.counts[c] for c in ("turns", "snapshots", "semantic", "custom", "audit"))
    assert first.counts["failures"] == 1
    superseded = [
        r
        for r in source.export_page("semantic", BundleSelection(), None, 100)[0]
        if r.supersedes_id
    ]
    assert superseded, "the store holds an UPDATE's version link"

    target = target_store(kind, tmp_path)
    imported = import_bundle(
        UnitOfWork(target), tmp_path / "bundle", run_id="imp", rejects_file=tmp_path / "r"
    )
    assert imported.digests_match, imported.digest_differences
    assert imported.conflicts == 0
    again = export_bundle(UnitOfWork(target), tmp_path / "again", BundleSelection())
    assert again.digests == first.digests
    assert again.counts == first.counts

    for collection in COLLECTIONS:
        embed_collection(
            UnitOfWork(target), collection, EMBEDDER, run_id="imp", batch_size=50, state="serving"
        )
    if kind == "sqlite":
        assert found(target) == found(source), "the same ids in the same order"
    else:  # another engine: the same ids within a user (maya's and bob's turns are the same
        # texts, so across the org every distance ties and either may come first)
        assert {k: set(v) for k, v in found(target).items() if k[2] == "maya"} == {
            k: set(v) for k, v in found(source).items() if k[2] == "maya"
        }

    repeat = import_bundle(
        UnitOfWork(target), tmp_path / "bundle", run_id="imp2", rejects_file=tmp_path / "r2"
    )
    assert sum(repeat.written.values()) == 0, "a second import writes nothing"
    assert repeat.digests_match
    target.close()


def test_a_record_held_with_other_content_is_rejected_not_overwritten(source, tmp_path) -> None:
    export_bundle(UnitOfWork(source), tmp_path / "bundle", BundleSelection(user_id="maya"))
    target = target_store("sqlite", tmp_path)
    memory_id = source.export_page("semantic", BundleSelection(user_id="maya"), None, 1)[0][0].id
    with target.write_transaction():
        target.add_memory("semantic", semantic_memory(memory_id, "something else", "maya"), None)

    rejects = tmp_path / "import-rejects.jsonl"
    imported = import_bundle(
        UnitOfWork(target), tmp_path / "bundle", run_id="imp", rejects_file=rejects
    )

    assert imported.conflicts == 1
    (reject,) = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert memory_id in reject["reason"]
    assert reject["path"].endswith("semantic.parquet")
    assert target.get_memory("semantic", memory_id)["text"] == "something else", "kept"
    assert not imported.digests_match
    assert any(d.startswith("semantic:") for d in imported.digest_differences)
    target.close()


def test_a_bundle_of_custom_types_the_target_has_not_declared_is_refused_first(
    source, tmp_path
) -> None:
    from mempipe.errors import ConfigError

    export_bundle(UnitOfWork(source), tmp_path / "bundle", BundleSelection())
    url = f"sqlite:///{tmp_path / 'bare.db'}"
    prepare_store(url, None, create=True)
    bare = open_store(url, migrate=True)
    with pytest.raises(ConfigError, match="custom types the target has not declared: ticket"):
        import_bundle(
            UnitOfWork(bare), tmp_path / "bundle", run_id="imp", rejects_file=tmp_path / "r"
        )
    assert bare.stats().turns == 0, "nothing written"
    bare.close()


@pytest.mark.parametrize("kind", ["sqlite", "mongomock"])
def test_vectors_travel_with_the_bundle_and_serve_at_once(source, tmp_path, kind) -> None:
    exported = export_bundle(
        UnitOfWork(source), tmp_path / "bundle", BundleSelection(), with_vectors=True
    )
    assert exported.vectors["turns"] == exported.counts["turns"]
    assert exported.vectors["semantic"] == exported.counts["semantic"]

    target = target_store(kind, tmp_path)
    imported = import_bundle(
        UnitOfWork(target), tmp_path / "bundle", run_id="imp", rejects_file=tmp_path / "r"
    )

    assert imported.vectors_reused == sum(exported.vectors.values())
    assert imported.without_vector == 0
    assert imported.digests_match, imported.digest_differences
    assert target.serving_model("semantic") == EMBEDDER.model_id
    if kind == "sqlite":
        assert found(target) == found(source), "searches answer without a re-embed"
    else:
        assert {k: set(v) for k, v in found(target).items() if k[2] == "maya"} == {
            k: set(v) for k, v in found(source).items() if k[2] == "maya"
        }
    target.close()


def test_a_copy_with_vectors_searches_as_its_source(source, tmp_path) -> None:
    from mempipe.services.copy import copy_store

    target = target_store("sqlite", tmp_path)
    copied = copy_store(
        UnitOfWork(source),
        UnitOfWork(target),
        run_id="c",
        rejects_file=tmp_path / "r",
        with_vectors=True,
        batch_size=7,
    )
    assert copied.verified, copied.differences
    assert copied.vectors["turns"] == len(
        source.export_page("turns", BundleSelection(), None, 999)[0]
    )
    assert found(target) == found(source)
    target.close()


def test_an_import_cut_short_and_run_again_writes_each_audit_row_once(source, tmp_path) -> None:
    """As a killed import leaves a target: its runs written, only part of their audit rows."""
    export_bundle(UnitOfWork(source), tmp_path / "bundle", BundleSelection())
    target = target_store("sqlite", tmp_path)
    runs = source.export_page("runs", BundleSelection(), None, 100)[0]
    audit = source.export_page("audit", BundleSelection(), None, 1000)[0]
    target.add_runs(runs)
    with target.write_transaction():
        target.add_audit(audit[: len(audit) // 2])

    again = import_bundle(
        UnitOfWork(target), tmp_path / "bundle", run_id="imp", rejects_file=tmp_path / "r"
    )

    assert again.written["audit"] == len(audit) - len(audit) // 2
    assert again.digests_match, again.digest_differences
    target.close()
