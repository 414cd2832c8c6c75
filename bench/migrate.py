"""Export and import rates against pyarrow on the same rows, and flat memory on a big store.

    python bench/migrate.py [--turns 100000] [--big STORE.db] [--out DIR]

On real text (the LongMemEval development set's turns, repeated under more users up to
``--turns``, with the snapshots promotion cuts from them):

* export: ``export_bundle`` of the store, records/s; reference in the same run: pyarrow writing
  the very same records (as Python rows, built beforehand) to one Parquet file each;
* import: ``import_bundle`` of that bundle into a fresh store, records/s; reference: pyarrow
  reading the bundle's files back into Python rows;
* memory (``--big``): peak RSS of a whole ``mempipe export`` process and of a ``mempipe copy``
  (SQLite to SQLite) process over an existing store, e.g. the 1,000,000-turn store that
  ``bench/search.py --turns 1000000`` keeps.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from mempipe.adapters.store.unit_of_work import UnitOfWork

sys.path.insert(0, str(Path(__file__).parent))

from processes import run_mempipe
from search import repeated_turns

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def build(path: Path, out: Path, turns: int) -> None:
    from mempipe.adapters.store import open_store
    from mempipe.bootstrap import prepare_store
    from mempipe.schemas.archive import ArchiveFormat, IngestRequest
    from mempipe.schemas.config import PromotionLimits
    from mempipe.schemas.identity import IdentityDefaults
    from mempipe.services.backfill.ingest import ingest_file
    from mempipe.services.promote import promote_sessions

    archive = out / f"turns-{turns}.jsonl"
    with archive.open("wb") as f:
        for turn in repeated_turns(turns, 200):
            f.write(orjson.dumps(turn) + b"\n")
    url = f"sqlite:///{path}"
    prepare_store(url, None, create=True)
    store = open_store(url, migrate=True)
    defaults = IdentityDefaults(org_id="bench", project_id="lme")
    ingest_file(
        UnitOfWork(store),
        IngestRequest(
            path=archive,
            format=ArchiveFormat.TURNS,
            defaults=defaults,
            run_id="b",
            rejects_file=out / "r",
        ),
    )
    promote_sessions(UnitOfWork(store), PromotionLimits(), ["semantic"], run_id="b")
    store.close()
    archive.unlink()


def pyarrow_reference(store_path: Path, out: Path) -> tuple[int, float, float]:
    """Records, seconds for pyarrow to write them, seconds to read them back as rows."""
    from mempipe.adapters.store import open_store
    from mempipe.schemas.arrow import arrow_rows, arrow_schema
    from mempipe.schemas.bundle import BUNDLE_MODELS, BundleSelection

    store = open_store(f"sqlite:///{store_path}", read_only=True)
    rows: dict[str, list[dict]] = {}
    for collection in BUNDLE_MODELS:
        records, after = [], None
        while True:
            page, after = store.export_page(collection, BundleSelection(), after, 5000)
            records += arrow_rows(page, BUNDLE_MODELS[collection])
            if len(page) < 5000:
                break
        rows[collection] = records
    store.close()
    reference = out / "reference"
    shutil.rmtree(reference, ignore_errors=True)
    reference.mkdir()
    started = time.perf_counter()
    for collection, records in rows.items():
        schema = arrow_schema(BUNDLE_MODELS[collection])
        table = pa.Table.from_pylist(records, schema=schema)
        pq.write_table(table, reference / f"{collection}.parquet")
    written = time.perf_counter() - started
    started = time.perf_counter()
    for collection in rows:
        for batch in pq.ParquetFile(reference / f"{collection}.parquet").iter_batches(2000):
            batch.to_pylist()
    read = time.perf_counter() - started
    return sum(len(r) for r in rows.values()), written, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--big", type=Path, default=None, help="a store for the memory figures")
    parser.add_argument("--out", type=Path, default=Path("bench/out/migrate"))
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    from mempipe.adapters.store import open_store
    from mempipe.bootstrap import prepare_store
    from mempipe.schemas.bundle import BundleSelection
    from mempipe.services.bundle_import import import_bundle
    from mempipe.services.export import export_bundle

    store_path = out / f"source-{args.turns}.db"
    if not store_path.exists():
        build(store_path, out, args.turns)
    records, arrow_write, arrow_read = pyarrow_reference(store_path, out)

    bundle = out / "bundle"
    shutil.rmtree(bundle, ignore_errors=True)
    source = open_store(f"sqlite:///{store_path}", read_only=True)
    started = time.perf_counter()
    exported = export_bundle(UnitOfWork(source), bundle, BundleSelection())
    export_s = time.perf_counter() - started
    source.close()
    assert sum(exported.counts.values()) == records

    target_path = out / "target.db"
    for stale in out.glob("target.db*"):
        stale.unlink()
    prepare_store(f"sqlite:///{target_path}", None, create=True)
    target = open_store(f"sqlite:///{target_path}", migrate=True)
    started = time.perf_counter()
    imported = import_bundle(
        UnitOfWork(target), bundle, run_id="bench", rejects_file=out / "rejects.jsonl"
    )
    import_s = time.perf_counter() - started
    target.close()
    assert imported.digests_match, imported.digest_differences

    print(f"records: {records:,} ({exported.counts})")
    print(
        f"export: {records / export_s:,.0f} records/s ({export_s:.1f} s); "
        f"pyarrow writing the same rows: {records / arrow_write:,.0f} records/s "
        f"({arrow_write:.1f} s); ratio {arrow_write / export_s:.2f}"
    )
    print(
        f"import: {records / import_s:,.0f} records/s ({import_s:.1f} s); "
        f"pyarrow reading them back: {records / arrow_read:,.0f} records/s "
        f"({arrow_read:.1f} s); ratio {arrow_read / import_s:.2f}"
    )

    if args.big is not None:
        big = args.big.resolve()
        seconds, rss, _ = run_mempipe(
            ["export", "--out", str(out / "big-bundle"), "--store", f"sqlite:///{big}"], out
        )
        print(f"mempipe export of {big.name}: {seconds:.0f} s, peak RSS {rss:.0f} MB")
        copy = out / "big-copy.db"
        for stale in out.glob("big-copy.db*"):
            stale.unlink()
        seconds, rss, _ = run_mempipe(
            ["copy", "--to", f"sqlite:///{copy}", "--store", f"sqlite:///{big}"], out
        )
        print(f"mempipe copy of {big.name} to SQLite: {seconds:.0f} s, peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
