"""Retrieval quality on the LongMemEval development set, against a plain baseline in the same run.

    python bench/retrieval.py [--out DIR] [--k 10]

Loads the development set (``../shared/data/longmemeval-dev/``: 39,524 real turns, 80 questions,
each question's history under its own user) into a SQLite store once, with every turn embedded
by all-MiniLM-L6-v2 (the vectors are cached under ``--out``; the first run embeds 37,574 texts,
about 20 minutes on 2 cores). Then, each question searched within its own user, recall@k of the
evidence turns for:

* mempipe: ``evaluate`` (the code behind ``mempipe eval``) in text, semantic and hybrid mode;
* the plain baseline on the very same texts and vectors: bm25s with English stop words, cosine
  of the same vectors (numpy), and reciprocal rank fusion (k = 60) of both top-100 lists.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import orjson

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.embedding import ModelRegistration

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

DATA = Path(
    os.environ.get(
        "MEMPIPE_LONGMEMEVAL", Path(__file__).parents[2] / "shared" / "data" / "longmemeval-dev"
    )
)
MODEL = "all-MiniLM-L6-v2"
POOL = 100


def load(store_path: Path, out: Path) -> None:
    from mempipe.adapters.embedding import embedder_for
    from mempipe.adapters.store import open_store
    from mempipe.bootstrap import prepare_store
    from mempipe.schemas.archive import ArchiveFormat, IngestRequest
    from mempipe.schemas.config import ProjectConfig
    from mempipe.schemas.identity import IdentityDefaults
    from mempipe.services.backfill.ingest import ingest_file

    url = f"sqlite:///{store_path}"
    prepare_store(url, ProjectConfig(), create=True)
    store = open_store(url, migrate=True)
    ingest_file(
        UnitOfWork(store),
        IngestRequest(
            path=DATA / "turns.jsonl.gz",
            format=ArchiveFormat.TURNS,
            defaults=IdentityDefaults(org_id="dev", project_id="lme"),
            run_id="bench",
            rejects_file=out / "rejects.jsonl",
        ),
    )
    texts = list(dict.fromkeys(c for (c,) in store._rows("SELECT content FROM turns ORDER BY id")))
    matrix = cached_vectors(out, texts)
    row_of = {text: i for i, text in enumerate(texts)}
    embedder = embedder_for(MODEL)
    store.register_model(
        ModelRegistration(
            collection="stm", model_id=MODEL, dimensions=embedder.dimensions, state="serving"
        )
    )
    rows = store._rows("SELECT id, content FROM turns ORDER BY id")
    for start in range(0, len(rows), 5000):
        batch = rows[start : start + 5000]
        store.set_vectors("stm", MODEL, [(i, matrix[row_of[c]].tolist()) for i, c in batch])
    store.close()


def cached_vectors(out: Path, texts: list[str]) -> np.ndarray:
    cache = out / f"vectors-{MODEL}-{len(texts)}.npy"
    if cache.exists():
        return np.load(cache)
    from mempipe.adapters.embedding import embedder_for

    started = time.perf_counter()
    matrix = np.asarray(embedder_for(MODEL).embed(texts), dtype=np.float32)
    print(f"embedded {len(texts):,} texts in {time.perf_counter() - started:.0f} s")
    np.save(cache, matrix)
    return matrix


def mempipe_recall(store_path: Path, k: int) -> dict[str, float]:
    from mempipe.adapters.embedding import embedder_for
    from mempipe.adapters.store import open_store
    from mempipe.schemas.search import SearchMode
    from mempipe.services.evaluation import evaluate, read_queries

    queries = read_queries(DATA / "queries.jsonl")
    store = open_store(f"sqlite:///{store_path}", read_only=True)
    recalls = {}
    for mode in SearchMode:
        result = evaluate(UnitOfWork(store), embedder_for, queries, "stm", mode, [k]).result
        recalls[mode.value] = result.recall_at[k]
    store.close()
    return recalls


def baseline_recall(k: int, out: Path) -> dict[str, float]:
    """bm25s + cosine + RRF(60) over each question's own user's turns."""
    import bm25s

    from mempipe.adapters.embedding import embedder_for

    by_user: dict[str, list[tuple[str, str]]] = defaultdict(list)
    with gzip.open(DATA / "turns.jsonl.gz") as lines:
        for line in lines:
            turn = orjson.loads(line)
            by_user[turn["user_id"]].append((turn["message_id"], turn["content"]))
    texts = list(dict.fromkeys(c for turns in by_user.values() for _, c in turns))
    matrix = cached_vectors(out, texts)
    row_of = {text: i for i, text in enumerate(texts)}
    queries = [orjson.loads(line) for line in (DATA / "queries.jsonl").read_bytes().splitlines()]
    query_vectors = np.asarray(embedder_for(MODEL).embed([q["query"] for q in queries]))
    found: dict[str, list[float]] = defaultdict(list)
    for query, vector in zip(queries, query_vectors, strict=True):
        turns = by_user[query["user_id"]]
        ids = [message_id for message_id, _ in turns]
        retriever = bm25s.BM25()
        retriever.index(
            bm25s.tokenize([c for _, c in turns], stopwords="en", show_progress=False),
            show_progress=False,
        )
        tokens = bm25s.tokenize([query["query"]], stopwords="en", show_progress=False)
        docs, scores = retriever.retrieve(tokens, k=min(POOL, len(ids)), show_progress=False)
        text = [ids[d] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
        vectors = matrix[[row_of[c] for _, c in turns]]
        dense = [ids[i] for i in np.argsort(-(vectors @ vector), kind="stable")[:POOL]]
        fused: dict[str, float] = defaultdict(float)
        for ranking in (text, dense):
            for rank, message_id in enumerate(ranking, start=1):
                fused[message_id] += 1 / (60 + rank)
        hybrid = sorted(fused, key=lambda m: -fused[m])
        relevant = set(query["relevant_ids"])
        for name, ranking in (("text", text), ("semantic", dense), ("hybrid", hybrid)):
            found[name].append(len(relevant & set(ranking[:k])) / len(relevant))
    return {name: sum(v) / len(v) for name, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out/retrieval"))
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    store_path = args.out / "dev.db"
    if not store_path.exists():
        started = time.perf_counter()
        load(store_path, args.out)
        print(f"loaded the development set in {time.perf_counter() - started:.0f} s")
    ours = mempipe_recall(store_path, args.k)
    theirs = baseline_recall(args.k, args.out)
    print(f"recall@{args.k}   {'mempipe':>8}  {'baseline':>8}")
    for mode in ("text", "semantic", "hybrid"):
        print(f"{mode:<10} {ours[mode]:>8.3f}  {theirs[mode]:>8.3f}")


if __name__ == "__main__":
    main()
