"""Replay on a local Dask cluster against the default thread runner, measured in the same run
on identical stores.

    python bench/scaleout.py [--sessions 600] [--workers 2] [--model hashing-256]

Builds the synthetic archive of bench/replay.py, loads it into two stores (not timed), then
times the `replay` flow on each: threads (concurrency N) and Dask (a local cluster of N worker
processes, cluster start-up included). Both must end with the same audit.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from pathlib import Path

from mempipe.adapters.store.unit_of_work import UnitOfWork

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

_spec = importlib.util.spec_from_file_location(
    "bench_replay", Path(__file__).with_name("replay.py")
)
bench_replay = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(bench_replay)  # type: ignore[union-attr]


def load(work: Path, name: str, archive: Path) -> str:
    from mempipe.adapters.store import open_store
    from mempipe.schemas.archive import ArchiveFormat, IngestRequest
    from mempipe.schemas.config import PromotionLimits
    from mempipe.schemas.identity import IdentityDefaults
    from mempipe.services.backfill.ingest import ingest_file
    from mempipe.services.promote import promote_sessions

    url = f"sqlite:///{work / f'{name}.db'}"
    store = open_store(url, migrate=True)
    for project in ("alpha", "beta"):
        ingest_file(
            UnitOfWork(store),
            IngestRequest(
                path=archive,
                format=ArchiveFormat.TURNS,
                defaults=IdentityDefaults(org_id="b", project_id=project),
                run_id="bench",
                rejects_file=work / "rejects.jsonl",
            ),
        )
    promote_sessions(
        UnitOfWork(store),
        PromotionLimits(),
        ["semantic", "episodic", "procedural", "taxonomic"],
        run_id="bench",
    )
    store.close()
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=600)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--model", default="hashing-256")
    args = parser.parse_args()

    from mempipe.flows.replay import replay_flow
    from mempipe.services.report.audit import scan_audit

    work = Path(tempfile.mkdtemp(prefix="mempipe-scaleout-bench-"))
    archive = work / "archive.jsonl"
    bench_replay.write_archive(archive, args.sessions)
    config = work / "project-config.yaml"
    config.write_text(f"memory:\n  embedding:\n    model: {args.model}\n")
    rates, audits = {}, {}
    for runner in ("threads", "dask"):
        url = load(work, runner, archive)
        started = time.perf_counter()
        summary = replay_flow(
            store=url,
            config=str(config),
            audit_dir=str(work / f"audit-{runner}"),
            concurrency=args.workers,
            task_runner=runner,
        )
        seconds = time.perf_counter() - started
        rates[runner] = summary.snapshots / seconds
        audits[runner] = scan_audit(work / f"audit-{runner}").collect().height
        print(
            f"{runner:<7} ({args.workers} {'threads' if runner == 'threads' else 'processes'}, "
            f"{args.model}): {summary.snapshots:,} snapshots, {summary.extractions:,} "
            f"extractions in {seconds:.2f} s = {rates[runner]:,.1f} snapshots/s"
        )
    assert audits["threads"] == audits["dask"], f"the audits differ: {audits}"
    print(f"same audit on both runners: {audits['dask']:,} rows")
    print(f"ratio dask / threads: {rates['dask'] / rates['threads']:.2f}")


if __name__ == "__main__":
    main()
