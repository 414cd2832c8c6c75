"""Re-embedding throughput against the model's own encode rate, and hybrid search latency.

    python bench/reembed.py [--hashing 20000] [--local 3000] [--search 100000]

* hashing: a store of ``--hashing`` memories embedded with ``hashing-256`` is moved to
  ``hashing-384`` by the ``reembed`` flow (fill beside, verify, switch); reference: the
  hashing-384 embedder encoding the same texts in the same batches, in the same run.
* local: the same with ``--local`` memories moved to ``all-MiniLM-L6-v2``; reference: the model
  encoding the same texts in the same batches.
* search: p50 / p95 latency of hybrid search (text + vectors, identity filter) over a store of
  ``--search`` memories embedded with hashing-256, kept under ``--out`` and reused by later
  runs of the same size (building it is not timed).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from mempipe.adapters.store.unit_of_work import UnitOfWork

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

WORDS = [
    *("airport", "seat", "refund", "passport", "hotel", "train", "visa", "luggage", "lisbon"),
    *("oslo", "tokyo", "madrid", "window", "aisle", "meal", "upgrade", "delay", "gate"),
    *("lounge", "booking", "invoice", "receipt", "policy", "manager", "approval"),
]
BATCH = 256


def texts(count: int) -> list[str]:
    rng = random.Random(5)
    return [f"user {n % 500} " + " ".join(rng.choices(WORDS, k=10)) for n in range(count)]


def fill(store_url: str, count: int, model: str, corpus: list[str] | None = None) -> list[str]:
    """A store of ``count`` semantic memories of 500 users embedded with ``model``: the texts of
    ``corpus``, else made-up ones."""
    from mempipe.adapters.embedding import embedder_for
    from mempipe.adapters.store import open_store
    from mempipe.schemas.memory import SemanticMemory

    store, embedder = open_store(store_url, migrate=True), embedder_for(model)
    store.ensure_vector_table("semantic", embedder.model_id, embedder.dimensions)
    now, corpus = datetime.now(UTC), corpus or texts(count)
    for start in range(0, count, 5000):
        chunk = corpus[start : start + 5000]
        vectors = embedder.embed(chunk)
        with store.write_transaction():
            for offset, (text, vector) in enumerate(zip(chunk, vectors, strict=True)):
                n = start + offset
                store.add_memory(
                    "semantic",
                    SemanticMemory(
                        id=f"m{n}",
                        org_id="o",
                        project_id="p",
                        user_id=f"u{n % 500}",
                        text=text,
                        has_embedding=True,
                        embedding_model_id=embedder.model_id,
                        created_at=now,
                        updated_at=now,
                    ),
                    vector,
                )
    store.close()
    return corpus


def move(work: Path, name: str, count: int, target: str) -> None:
    from mempipe.adapters.embedding import embedder_for
    from mempipe.flows.reembed import reembed_flow

    store_url = f"sqlite:///{work / f'{name}.db'}"
    corpus = fill(store_url, count, "hashing-256")
    embedder = embedder_for(target)
    embedder.embed(["warm up the model " * 50] * 64)  # loaded, past its numpy first texts
    started = time.perf_counter()
    summary = reembed_flow(
        model=target,
        collections=["semantic"],
        batch_size=BATCH,
        store=store_url,
        config=str(work / "none.yaml"),
    )
    seconds = time.perf_counter() - started
    assert summary.switched, summary.reason
    reference_started = time.perf_counter()
    for start in range(0, len(corpus), BATCH):
        embedder.embed(corpus[start : start + BATCH])
    reference = count / (time.perf_counter() - reference_started)
    rate = count / seconds
    print(
        f"{name}: reembed flow to {target}: {rate:,.0f} memories/s ({seconds:.2f} s for "
        f"{count:,}); the model alone: {reference:,.0f} texts/s; ratio {rate / reference:.2f}"
    )


def search_latency(out: Path, count: int, queries: int = 200) -> None:
    from mempipe.adapters.embedding import embedder_for
    from mempipe.adapters.store import open_store
    from mempipe.schemas.search import ReadFilter, SearchMode
    from mempipe.services.search import search

    path = out / f"search-{count}.db"
    store_url = f"sqlite:///{path}"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        fill(store_url, count, "hashing-256")
        print(f"search: {count:,} memories stored in {time.perf_counter() - started:.1f} s")
    store, rng = open_store(store_url, migrate=True), random.Random(9)
    timings = []
    for n in range(queries):
        query = " ".join(rng.choices(WORDS, k=3))
        filters = ReadFilter(org_id="o", project_id="p", user_id=f"u{n % 500}")
        began = time.perf_counter()
        search(UnitOfWork(store), embedder_for, query, "semantic", SearchMode.HYBRID, filters, 10)
        timings.append((time.perf_counter() - began) * 1000)
    store.close()
    p50 = statistics.median(timings)
    p95 = statistics.quantiles(timings, n=20)[-1]
    print(
        f"search: hybrid, top 10, user filter, {queries} queries: p50 {p50:.1f} ms, "
        f"p95 {p95:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hashing", type=int, default=20_000)
    parser.add_argument("--local", type=int, default=3_000)
    parser.add_argument("--search", type=int, default=100_000)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).parent / "out" / "reembed",
        help="where the search store is kept between runs (built once per size)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mempipe-reembed-bench-"))
    from mempipe.adapters.store import open_store
    from mempipe.flows.migrate import migrate_flow

    warmup = f"sqlite:///{work / 'warmup.db'}"
    open_store(warmup, migrate=True).close()
    migrate_flow(store=warmup, config=str(work / "none.yaml"))  # Prefect's first flow, untimed
    if args.hashing:
        move(work, "hashing", args.hashing, "hashing-384")
    if args.local:
        move(work, "local", args.local, "all-MiniLM-L6-v2")
    if args.search:
        search_latency(args.out, args.search)


if __name__ == "__main__":
    main()
